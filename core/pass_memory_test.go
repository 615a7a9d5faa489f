package core

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// A training step whose pass pool is past the bound is left alone: its
// backward and optimizer are built and computed as one graph, with no copy
// to the host; work beyond steps is then bounded.
func TestTheBoundLeavesTrainingStepsAlone(t *testing.T) {
	old := compactPassBytes
	compactPassBytes = 1 << 16 // far below one step's pass pool
	defer func() { compactPassBytes = old }()
	e := newEngine(t)
	rng := rand.New(rand.NewSource(1))
	m := newMLP(t, e, 32, 256, 4, 0.01, rng)
	x, labels := host(t, []int{64, 32}, make([]float32, 64*32)...), make([]int, 64)
	m.step(t, x, labels)
	before, l0 := e.Stats(), e.Residency().Ledger()
	for i := 0; i < 5; i++ {
		m.step(t, x, labels)
	}
	after, l1 := e.Stats(), e.Residency().Ledger()
	assert.Equal(t, int64(5), after.GraphComputes-before.GraphComputes, "one graph per step")
	assert.Less(t, l1.D2HBytes-l0.D2HBytes, int64(5*64), "only the losses are read back")
	require.Greater(t, l1.BufferBytes, compactPassBytes, "the step's pass pool is past the bound")

	// Beyond steps, the pool stays within twice the step's.
	step := e.mem.stepBytes
	for i := 0; i < 200; i++ {
		y, err := e.Scale(x, 2)
		require.NoError(t, err)
		_, err = y.Float32s()
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, e.Residency().Ledger().BufferBytes, 2*step+(1<<20))
}

// Constants uploaded into the pass pool (as devices make them) outlive a
// compaction of the pool before their use: an optimizer realizes pending
// parameters between making its numbers and reading them.
func TestUploadedConstantsSurviveCompaction(t *testing.T) {
	forceUploadedConstants = true
	defer func() { forceUploadedConstants = false }()
	old := compactPassBytes
	compactPassBytes = 1
	defer func() { compactPassBytes = old }()
	e := newEngine(t)
	hyper, err := e.constants([]float32{1, 2})
	require.NoError(t, err)
	e.mem.tapeRan, e.mem.stepComputed = true, true // beyond the step: Realize compacts
	_, err = e.Add(host(t, []int{2}, 1, 2), host(t, []int{2}, 0, 0))
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	sum, err := e.Add(hyper, hyper)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4}, values(t, sum))
}

// On an asynchronous device, backward first queues the forward (the device
// computes it while the host builds the rest of the step). The step's
// values are those of one graph, and the step is still the one computed
// after backward for the pass pool's bound: nothing but the losses is read
// back. (The CPU backend computes before returning, but the engine splits
// the step as on a device when it says it is asynchronous.)
func TestBackwardQueuesTheForwardOnAsyncDevices(t *testing.T) {
	old := compactPassBytes
	compactPassBytes = 1 << 16 // far below one step's pass pool
	defer func() { compactPassBytes = old }()
	// The weights' gradients (4 MiB for w1) make the backward's pass memory
	// several times the forward's: a bound taken from the forward alone
	// would compact the step.
	const in, hidden = 512, 2048
	x, labels := host(t, []int{64, in}, make([]float32, 64*in)...), make([]int, 64)
	for i := range labels {
		labels[i] = i % 4
		x.host[i*in+i%in] = float32(i%7) - 3
	}
	run := func(async bool) (*Engine, *mlp, []float32) {
		e := newEngine(t)
		if async {
			require.NoError(t, e.backend.ComputeAsDevice())
		}
		m := newMLP(t, e, in, hidden, 4, 0.01, rand.New(rand.NewSource(1)))
		var losses []float32
		for i := 0; i < 6; i++ {
			before, l0 := e.Stats(), e.Residency().Ledger()
			losses = append(losses, m.step(t, x, labels))
			after, l1 := e.Stats(), e.Residency().Ledger()
			if i > 0 {
				want := int64(1)
				if async {
					want = 2 // forward; backward and the optimizer
				}
				assert.Equal(t, want, after.GraphComputes-before.GraphComputes, "graphs in step %d (async %v)", i, async)
				assert.Less(t, l1.D2HBytes-l0.D2HBytes, int64(64), "only the loss is read back (async %v)", async)
			}
		}
		return e, m, losses
	}
	_, sync, want := run(false)
	e, async, got := run(true)
	// The last read (the loss) queued the update and did not wait for it:
	// the loss was the forward's, done. What the update writes must wait,
	// the moments too, which the fused kernel writes beside the weight.
	loss := async.lastLoss
	assert.Equal(t, e.backend.Launches()-1, loss.written, "the forward wrote the loss")
	assert.True(t, loss.readNow(), "the loss is read at once")
	assert.False(t, async.w1.readNow(), "the weights wait for the update")
	for _, m := range async.opt.state[async.w1] {
		assert.False(t, m.readNow(), "the moments wait for the update")
	}
	assert.Equal(t, want, got, "the losses")
	assert.Equal(t, values(t, sync.w1), values(t, async.w1), "the weights")
	assert.Equal(t, values(t, sync.b2), values(t, async.b2))
	assert.Equal(t, e.Residency().Ledger().BufferBytes, e.mem.stepBytes, "the bound's step is the whole step")
}

// readNow reports whether t's memory may be read without waiting at all.
func (t *Tensor) readNow() bool {
	return t.readsItsWriter() && t.engine.backend.Done(t.storage().written)
}

// A value that outlives its step but that the persistent pool cannot take
// (the budget) is read to the host instead; a full reset, which frees the
// persistent pool too, does the same. Neither loses it or fails the reset.
func TestKeptValuesGoToTheHostWhereThePersistentPoolCannotTakeThem(t *testing.T) {
	for _, full := range []bool{false, true} {
		e := newEngine(t)
		y, err := e.AddScalar(host(t, []int{3}, 1, 2, 3), 1)
		require.NoError(t, err)
		y.Hold()
		require.NoError(t, e.Realize())
		if full {
			require.NoError(t, e.Reset())
		} else {
			// Not a byte more than the pass pool holds.
			_, err = e.Residency().SetLimit(e.Residency().Ledger().TotalBufferBytes)
			require.NoError(t, err)
			require.NoError(t, e.Reset(residency.Pass))
			_, err = e.Residency().SetLimit(0)
			require.NoError(t, err)
		}
		assert.Nil(t, y.handle, "full %v: a host tensor now", full)
		assert.Equal(t, []float32{2, 3, 4}, values(t, y), "full %v", full)
		z, err := e.Scale(y, 2) // used again: uploaded like any host tensor
		require.NoError(t, err)
		assert.Equal(t, []float32{4, 6, 8}, values(t, z), "full %v", full)
	}
}

// A value detached in a tape and carried (an RNN's state) moves to the
// persistent pool at the next pass reset; the step's other activations go
// with it, and one carried but no longer referenced is not copied.
func TestCarriedValuesOutliveTheirStep(t *testing.T) {
	e := newEngine(t)
	var state, other *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		out, err := e.AddScalar(host(t, []int{2}, 1, 2), 1)
		if err != nil {
			return err
		}
		state = out.Detach()
		state.Carry()
		state.Hold()
		gone, err := e.Scale(out, 3)
		if err != nil {
			return err
		}
		g := gone.Detach()
		g.Carry()
		g.Hold()
		other, err = e.Scale(out, 2)
		other.Hold()
		return err
	}))
	require.NoError(t, e.Realize())
	// As for a large value: promote first collects, so a loop's garbage is
	// not copied.
	old := promoteCollectBytes
	promoteCollectBytes = 0
	defer func() { promoteCollectBytes = old }()
	copies := 0
	e.beforeCompute = func(g *ggmlcgo.Graph) { copies += g.NNodes() }
	require.NoError(t, e.WithGradTape(func() error { return nil }))
	assert.Equal(t, 1, copies, "one value copied")
	assert.Equal(t, residency.Persistent, state.storage().handle.Scope())
	assert.Equal(t, []float32{2, 3}, values(t, state))
	_, err := other.Float32s()
	assert.ErrorIs(t, err, residency.ErrStale, "an activation goes with its step")
}

// Outside a tape, results marked Transient (nothing will read them but the
// ops already built) are scratch, not held: they do not count toward the
// pass pool's bound, so a long chain of them is one graph; and reading one
// element of a large placed result reads that element, not the whole.
func TestTransientResultsAreNotHeld(t *testing.T) {
	old := compactPassBytes
	compactPassBytes = 3 << 16 // three results; the chain makes eight
	defer func() { compactPassBytes = old }()
	e := newEngine(t)
	x := host(t, []int{64, 256}, make([]float32, 64*256)...) // 64 KiB a result
	before := e.Stats().GraphComputes
	y := x
	for i := 0; i < 8; i++ {
		next := e.must(e.AddScalar(y, 1))
		if y != x {
			e.Transient(y)
		}
		y = next
	}
	assert.Equal(t, before, e.Stats().GraphComputes, "nothing computed while building")
	l0 := e.Residency().Ledger()
	v, err := e.must(e.Select(e.must(e.Select(y, 0, 63)), 0, 255)).Item()
	require.NoError(t, err)
	assert.Equal(t, float32(8), v)
	assert.Equal(t, before+2, e.Stats().GraphComputes, "the chain, then the element's copy")
	assert.Less(t, e.Residency().Ledger().D2HBytes-l0.D2HBytes, int64(64), "one element read back")
}
