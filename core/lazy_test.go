package core

import (
	"math"
	"testing"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEagerModeComputesEachOpAndAgrees(t *testing.T) {
	run := func(eager bool) ([]float32, Stats) {
		e := newEngine(t)
		e.SetEager(eager)
		x := host(t, []int{2, 3}, 1, -2, 3, 0.5, 2, -1)
		w := host(t, []int{4, 3}, 0.1, 0.2, 0.3, -0.1, 0.5, 0.2, 0.3, -0.3, 0.1, 0.2, 0.2, 0.2)
		require.NoError(t, w.SetRequiresGrad(true))
		var loss *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			y, err := e.Linear(x, w)
			if err == nil {
				y, err = e.Tanh(y)
			}
			if err == nil {
				loss, err = e.Sum(y)
			}
			return err
		}))
		_, err := e.Backward(loss)
		require.NoError(t, err)
		return values(t, w.Grad()), e.Stats()
	}
	lazy, ls := run(false)
	eager, es := run(true)
	assert.Equal(t, lazy, eager)
	assert.Equal(t, int64(1), ls.GraphComputes, "lazy: one graph")
	assert.Greater(t, es.GraphComputes, int64(4), "eager: a compute per op")
}

func TestRealizedValuesAreLeavesAndReadValuesOutliveTheStep(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{3}, 1, 2, 3)
	y, err := e.Exp(x)
	require.NoError(t, err)
	y, err = e.Tanh(y)
	require.NoError(t, err)
	_, err = y.Float32s()
	require.NoError(t, err)
	before := e.Stats()
	z, err := e.AddScalar(y, 1)
	require.NoError(t, err)
	_, err = z.Float32s()
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Stats().NodesComputed-before.NodesComputed, "only the new node runs; y's ancestry does not")

	// A value read in one step can still be read after the next pass reset;
	// one never read is an error that names the pool.
	unread, err := e.AddScalar(y, 2)
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	require.NoError(t, e.WithGradTape(func() error { return nil }))
	assert.Equal(t, values(t, z), []float32{float32(math.Tanh(math.E)) + 1, float32(math.Tanh(math.Exp(2))) + 1, float32(math.Tanh(math.Exp(3))) + 1})
	_, err = unread.Float32s()
	assert.ErrorContains(t, err, "reset of the pass pool")
}

// TestKeptValuesFromOutsideATapeSurviveSteps: data prepared before the
// loop and held outlives every step's pass reset, also in eager mode,
// where it is computed before its caller holds it.
func TestKeptValuesFromOutsideATapeSurviveSteps(t *testing.T) {
	for _, eager := range []bool{false, true} {
		e := newEngine(t)
		e.SetEager(eager)
		x := host(t, []int{3}, 1, 2, 3)
		y, err := e.AddScalar(x, 1) // data prepared before the loop
		require.NoError(t, err)
		y.Hold()
		w := host(t, []int{3}, 1, 1, 1)
		require.NoError(t, w.SetRequiresGrad(true))
		for step := 0; step < 3; step++ {
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				loss, err = sumOf(e)(e.Mul(w, y))
				return err
			}), "eager %v, step %d", eager, step)
			v, err := loss.Item()
			require.NoError(t, err)
			assert.Equal(t, float32(9), v, "eager %v, step %d", eager, step)
		}
		assert.Equal(t, []float32{2, 3, 4}, values(t, y))
	}
}

// TestKeptValuesUpdatedInPlaceSurviveSteps: a kept value of the pass pool
// updated in place (x:div_(2) on data prepared before the loop, a
// gradient zeroed by zero_grad(false)) outlives the next pass reset with
// its new value, read before the update or not, lazily and eagerly.
func TestKeptValuesUpdatedInPlaceSurviveSteps(t *testing.T) {
	for _, eager := range []bool{false, true} {
		for _, read := range []bool{false, true} {
			e := newEngine(t)
			e.SetEager(eager)
			y, err := e.AddScalar(host(t, []int{3}, 1, 2, 3), 1)
			require.NoError(t, err)
			y.Hold()
			if read {
				assert.Equal(t, []float32{2, 3, 4}, values(t, y))
			}
			require.NoError(t, e.NoGrad(func() error { return e.Assign(y, host(t, []int{3}, 7, 8, 9)) }))
			require.NoError(t, e.Realize())
			require.NoError(t, e.WithGradTape(func() error { return nil })) // the pass reset
			got, err := y.Float32s()
			require.NoError(t, err, "eager %v, read %v", eager, read)
			assert.Equal(t, []float32{7, 8, 9}, got, "eager %v, read %v", eager, read)
			// Updated again in a later pass: placed again from its copy.
			require.NoError(t, e.NoGrad(func() error {
				twice, err := e.Scale(y, 2)
				if err == nil {
					err = e.Assign(y, twice)
				}
				return err
			}), "eager %v, read %v", eager, read)
			require.NoError(t, e.WithGradTape(func() error { return nil }))
			assert.Equal(t, []float32{14, 16, 18}, values(t, y), "eager %v, read %v", eager, read)
		}
	}
}

// TestAnActivationKeptAndUpdatedLaterSurvives: a value made inside a tape
// and kept (a read gave it a host copy) is the earlier step's, not an
// activation of the tape that updates it in place later: the update
// outlives the next pass reset.
func TestAnActivationKeptAndUpdatedLaterSurvives(t *testing.T) {
	e := newEngine(t)
	var y *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		y, err = e.AddScalar(host(t, []int{2}, 1, 2), 1)
		return err
	}))
	y.Hold()
	assert.Equal(t, []float32{2, 3}, values(t, y)) // the read keeps a host copy
	require.NoError(t, e.WithGradTape(func() error { return nil }))
	require.NoError(t, e.Assign(y, host(t, []int{2}, 5, 6)))
	require.NoError(t, e.Realize())
	require.NoError(t, e.WithGradTape(func() error { return nil }))
	assert.Equal(t, []float32{5, 6}, values(t, y))
}

// A value kept beyond its step (held, computed outside a tape) moves into
// the persistent pool at the pass reset, by a copy queued on the device:
// the host does not wait for the graph that computed it, nor for the copy.
// An in-place update before the reset is what moves.
func TestKeptValuesMoveToThePersistentPoolAtTheReset(t *testing.T) {
	e := newEngine(t)
	require.NoError(t, e.backend.ComputeAsDevice())
	x := host(t, []int{3}, 1, 2, 3)
	y, err := e.AddScalar(x, 1)
	require.NoError(t, err)
	z, err := e.Scale(x, 2)
	require.NoError(t, err)
	y.Hold()
	z.Hold()
	require.NoError(t, e.Realize())
	require.NoError(t, e.Assign(z, host(t, []int{3}, 7, 7, 7)))
	d2h := e.Residency().Ledger().D2HBytes
	require.NoError(t, e.Reset(residency.Pass))
	assert.False(t, e.backend.Done(e.backend.Launches()), "the host did not wait for the copies")
	assert.Equal(t, d2h, e.Residency().Ledger().D2HBytes, "nothing was read to the host")
	for _, k := range []*Tensor{y, z} {
		assert.Equal(t, residency.Persistent, k.handle.Scope())
		assert.True(t, k.handle.Live())
	}
	assert.Equal(t, []float32{2, 3, 4}, values(t, y))
	assert.Equal(t, []float32{7, 7, 7}, values(t, z), "never the value before the update")
	require.NoError(t, e.Assign(y, host(t, []int{3}, 5, 5, 5)))
	require.NoError(t, e.Reset(residency.Pass))
	assert.Equal(t, []float32{5, 5, 5}, values(t, y), "updated in place where it lives")
}

// One host tensor feeding two engines (two runtimes): each uploads its own
// copy, so a reset of one never leaves the other reading freed memory.
func TestAHostTensorFeedsTwoEnginesIndependently(t *testing.T) {
	a, b := newEngine(t), newEngine(t)
	x := host(t, []int{3}, 1, 2, 3)
	ya, err := a.Scale(x, 2)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 4, 6}, values(t, ya))
	yb, err := b.Scale(x, 3)
	require.NoError(t, err)
	require.NoError(t, a.Reset()) // frees a's upload of x
	assert.Equal(t, []float32{3, 6, 9}, values(t, yb))
	zb, err := b.AddScalar(x, 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 3, 4}, values(t, zb))
	// A change of the host values is seen by the next op of either engine.
	require.NoError(t, a.Assign(x, host(t, []int{3}, 5, 5, 5)))
	wb, err := b.Scale(x, 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{5, 5, 5}, values(t, wb))
}

// TestABigOpFitsWhateverRoomIsLeft: max along a dim is one op of about 30
// nodes; with 16 to 29 slots left in the current node context it failed
// ("no room for another node") while contexts promised only 16 slots.
func TestABigOpFitsWhateverRoomIsLeft(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{3, 4}, 1, 5, 2, 0, 3, 3, 1, 2, 9, 8, 7, 6)
	for left := opNodeRoom; left >= 1; left-- {
		c, err := e.nodeContext()
		require.NoError(t, err)
		for c.Room() > left { // use up slots with scratch nodes
			_, err := c.NewTensor(ggmlcgo.F32, []int64{1})
			require.NoError(t, err)
		}
		m, _, err := e.MaxDim(x, 1, false)
		require.NoError(t, err, "with %d slots left", left)
		assert.Equal(t, []float32{5, 3, 9}, values(t, m))
	}
}
