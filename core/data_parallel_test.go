package core

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
)

// TestDataParallelAveragesGradients runs gradient averaging against a fake
// collective: "the other process" adds 1 to every gradient element, so
// each gradient must end as (local + 1) / 2; a parameter without a local
// gradient adds zeros and ends at 1/2. It checks one bucket and several,
// the number of collectives, and that a steady step stays at two graph
// computes.
func TestDataParallelAveragesGradients(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bucket  int64
		buckets int
	}{{"one bucket", 25 << 20, 1}, {"a bucket per parameter", 4, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b int64) { bucketBytes = b }(bucketBytes)
			bucketBytes = tc.bucket
			e := newEngine(t)
			w1, err := FromFloat32([]float32{1, -2, 3}, 3)
			require.NoError(t, err)
			w2, err := FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
			require.NoError(t, err)
			unused, err := FromFloat32([]float32{5, 6}, 2)
			require.NoError(t, err)
			for i, w := range []*Tensor{w1, w2, unused} {
				require.NoError(t, w.SetRequiresGrad(true))
				if i < 2 {
					require.NoError(t, w.MoveToDevice(e, residency.Persistent))
				}
			}
			calls := 0
			otherAddsOne := func(b Buffer) error {
				calls++
				time.Sleep(time.Millisecond) // a collective takes time: Stats counts it
				assert.False(t, b.OnDevice)
				v := unsafe.Slice((*float32)(b.Data), b.Count)
				for i := range v {
					v[i]++
				}
				return nil
			}
			require.NoError(t, e.SetDataParallel([]*Tensor{w1, w2, w1, unused}, 2, otherAddsOne, nil))

			backward := func() {
				ZeroGrad([]*Tensor{w1, w2, unused})
				var loss *Tensor
				require.NoError(t, e.WithGradTape(func() error {
					sq, err := e.Mul(w1, w1) // gradient 2 w1
					if err != nil {
						return err
					}
					a, err := e.Sum(sq)
					if err != nil {
						return err
					}
					b, err := e.Sum(w2) // gradient 1
					if err != nil {
						return err
					}
					loss, err = e.Add(a, b)
					return err
				}))
				_, err := e.Backward(loss)
				require.NoError(t, err)
			}
			step := func() {
				backward()
				_, err := w1.Grad().Float32s() // a read computes what is due
				require.NoError(t, err)
			}
			backward()
			// unused has no gradient here: the sums run at once, to learn
			// whether another process gave it one (keepUnusedGrads).
			assert.Equal(t, tc.buckets, calls, "summed at the backward")
			assertValues(t, []float32{1.5, -1.5, 3.5}, w1.Grad()) // (2 w1 + 1) / 2
			assertValues(t, []float32{1, 1, 1, 1}, w2.Grad())
			assertValues(t, []float32{0.5, 0.5}, unused.Grad())
			assert.Equal(t, tc.buckets, calls, "one collective per bucket")
			assert.GreaterOrEqual(t, e.Stats().ReduceTime, time.Duration(tc.buckets)*time.Millisecond, "time in the collectives")
			assert.Positive(t, e.Stats().ComputeTime, "time in graph computes")

			before := e.Stats().GraphComputes
			step()
			step()
			require.NoError(t, e.Realize())
			assert.Equal(t, int64(4), e.Stats().GraphComputes-before, "two graph computes per step")
			assertValues(t, []float32{1.5, -1.5, 3.5}, w1.Grad())

			calls = 0
			backward()
			require.NoError(t, e.SetDataParallel(nil, 0, nil, nil)) // off again, after the sums due
			assert.Equal(t, tc.buckets, calls)
			assertValues(t, []float32{1.5, -1.5, 3.5}, w1.Grad())
			calls = 0
			step()
			assert.Equal(t, 0, calls)
			assertValues(t, []float32{2, -4, 6}, w1.Grad())
		})
	}
}

func assertValues(t *testing.T, want []float32, x *Tensor) {
	t.Helper()
	require.NotNil(t, x)
	got, err := x.Float32s()
	require.NoError(t, err)
	assert.InDeltaSlice(t, want, got, 1e-6)
}

// TestACollectivesWriteOfAKeptValueSurvivesSteps: a kept value of the pass
// pool (a metric computed outside a tape) that a collective changes in
// place keeps the new value across the next pass reset, and lent again at
// a later step it is placed again from its host copy.
func TestACollectivesWriteOfAKeptValueSurvivesSteps(t *testing.T) {
	e := newEngine(t)
	m, err := e.AddScalar(host(t, []int{2}, 1, 2), 1)
	require.NoError(t, err)
	m.Hold()
	double := func(b Buffer) error {
		v := unsafe.Slice((*float32)(b.Data), b.Count)
		for i := range v {
			v[i] *= 2
		}
		return nil
	}
	require.NoError(t, e.WithBuffer(m, true, double))
	require.NoError(t, e.WithGradTape(func() error { return nil })) // the pass reset
	assert.Equal(t, []float32{4, 6}, values(t, m), "the collective's value, after the reset")
	require.NoError(t, e.WithBuffer(m, true, double), "lent at a later step")
	require.NoError(t, e.WithGradTape(func() error { return nil }))
	assert.Equal(t, []float32{8, 12}, values(t, m))
}

// TestWithBufferRefusesViews: a collective needs a tensor's own memory.
func TestWithBufferRefusesViews(t *testing.T) {
	e := newEngine(t)
	x, err := FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	require.NoError(t, err)
	v, err := e.Transpose(x, 0, 1)
	require.NoError(t, err)
	err = e.WithBuffer(v, true, func(Buffer) error { return nil })
	require.ErrorContains(t, err, "has no memory of its own")
}

// TestWithBufferRefusesWritesTheTapeNeeds: a collective may not change in
// place a value a gradient reads (relu's gradient reads its result), before
// backward or after it (as copy_, for as long as the result lives); it may
// read it, and change a copy.
func TestWithBufferRefusesWritesTheTapeNeeds(t *testing.T) {
	e := newEngine(t)
	x, err := FromFloat32([]float32{-1, 2}, 2)
	require.NoError(t, err)
	require.NoError(t, x.SetRequiresGrad(true))
	var y, loss *Tensor
	require.NoError(t, e.WithGradTape(func() (err error) {
		if y, err = e.Relu(x); err == nil {
			loss, err = e.Sum(y)
		}
		return err
	}))
	refused := func(when string) {
		err := e.WithBuffer(y, true, func(b Buffer) error { t.Fatal("lent for writing"); return nil })
		require.ErrorContains(t, err, "in-place change of a tensor the tape needs (it was computed by relu)", when)
	}
	refused("before backward")
	require.NoError(t, e.WithBuffer(y, false, func(Buffer) error { return nil }))
	_, err = e.Backward(loss)
	require.NoError(t, err)
	assertValues(t, []float32{0, 1}, x.Grad())
	refused("after backward")
	c, err := e.Clone(y)
	require.NoError(t, err)
	require.NoError(t, e.WithBuffer(c, true, func(Buffer) error { return nil }), "a copy made outside the tape")
}

// On an asynchronous device a read queues what is pending (tensor.go's
// overlapsReads), but not under data parallelism with the sums between
// computes, where that measured slower: reading the loss after backward
// leaves the sums and the update for the next compute. With the sums in
// the graph reads overlap (unless GGLUA_DIST_READS=wait).
func TestReadsUnderDataParallelWithSumsBetweenComputesWait(t *testing.T) {
	defer func(was bool) { distReadsWait = was }(distReadsWait)
	distReadsWait = false
	e := newEngine(t)
	require.NoError(t, e.backend.ComputeAsDevice())
	calls := 0
	_, loss := squaresBackward(t, e, func(Buffer) error { calls++; return nil })
	v, err := loss.Item()
	require.NoError(t, err)
	assert.Equal(t, float32(5), v)
	assert.Equal(t, 0, calls, "the sums wait for the next compute")
	assert.NotEmpty(t, e.pending, "the averages stay pending")

	require.NoError(t, e.SetDataParallel(nil, 0, nil, nil))
	e2 := newEngine(t)
	require.NoError(t, e2.backend.ComputeAsDevice())
	assert.True(t, e2.overlapsReads(), "without data parallelism reads overlap")
	require.NoError(t, e2.SetDataParallel(mlpParams(t, e2), 2, nil, scaleCollective(t, 1)))
	assert.True(t, e2.overlapsReads(), "with the sums in the graph too")
	distReadsWait = true
	assert.False(t, e2.overlapsReads(), "GGLUA_DIST_READS=wait")
}

// A failed sum leaves no wrong gradient behind: the averages that would
// read the unsummed buckets are dropped, whether the sum ran at a script's
// end (FinishCollectives) or before a compute (Realize).
func TestAFailedSumDropsTheAverages(t *testing.T) {
	for _, via := range []string{"FinishCollectives", "Realize"} {
		t.Run(via, func(t *testing.T) {
			e := newEngine(t)
			lost := errors.New("peer lost")
			w, _ := squaresBackward(t, e, func(Buffer) error { return lost })
			var err error
			if via == "Realize" {
				err = e.Realize()
			} else {
				err = e.FinishCollectives()
			}
			require.ErrorIs(t, err, lost)
			assert.Nil(t, w.Grad(), "no gradient: this process's alone is not the average")
			require.NoError(t, e.Realize(), "nothing of the step is left to compute")
		})
	}
}

// squaresBackward makes a resident w = [1, 2], data-parallel with sum over
// two processes, and runs backward of sum(w·w) (loss 5).
func squaresBackward(t *testing.T, e *Engine, sum func(Buffer) error) (w, loss *Tensor) {
	t.Helper()
	w, err := FromFloat32([]float32{1, 2}, 2)
	require.NoError(t, err)
	require.NoError(t, w.SetRequiresGrad(true))
	require.NoError(t, w.MoveToDevice(e, residency.Persistent))
	require.NoError(t, e.SetDataParallel([]*Tensor{w}, 2, sum, nil))
	require.NoError(t, e.WithGradTape(func() error {
		sq, err := e.Mul(w, w)
		if err == nil {
			loss, err = e.Sum(sq)
		}
		return err
	}))
	_, err = e.Backward(loss)
	require.NoError(t, err)
	return w, loss
}
