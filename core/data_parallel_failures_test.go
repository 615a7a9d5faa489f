package core

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

// How the in-graph gradient sums (data_parallel_sums.go) fail: a sum, a
// backward or a compute that fails, a reset of the persistent pool. The
// helpers (mlpParams, scaleCollective, ...) are data_parallel_sums_test.go's.

// TestAFailedInGraphSumDropsTheGradients: a failure the nodes recorded is
// an error of the compute that says the job must end, leaves no gradient
// (this process's alone is not the average), and stays: every later
// compute reports it (the collectives are out of step).
func TestAFailedInGraphSumDropsTheGradients(t *testing.T) {
	e := newEngine(t)
	params := mlpParams(t, e)
	coll := scaleCollective(t, 2)
	lost := errors.New("peer lost")
	var fail error
	coll.Err = func() error { return fail }
	require.NoError(t, e.SetDataParallel(params, 2, nil, coll))
	mlpBackward(t, e, params, false)
	fail = lost
	err := e.Realize()
	require.ErrorIs(t, err, lost)
	assert.ErrorContains(t, err, "the processes' weights may differ now (end the job)")
	assert.Nil(t, params[0].Grad())
	_, err = e.Sum(params[0])
	require.NoError(t, err)
	require.ErrorIs(t, e.Realize(), lost, "reported again")
}

// TestAFailedBackwardLeavesNoSum: a backward that fails after some buckets'
// sums were queued (its first layer's input changed in place) drops them
// (a stray one would be a collective the other processes do not run); the
// gradients it would have added to (they are bucket slices) stay, in eager
// mode too. The other processes may have run that step's sums, so the
// next backward, and the script's end, refuse with an error that says so;
// data parallelism turned off and on again works, one sum per bucket.
func TestAFailedBackwardLeavesNoSum(t *testing.T) {
	defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
	graphBucketBytes = 4 // a bucket per parameter
	want := refGrads(t)
	// Eager mode too: every op computes at once, but not inside a backward
	// that sums in its graph.
	for _, eager := range []bool{false, true} {
		e, params := summingMLP(t)
		mlpBackward(t, e, params, false)
		assertScaled(t, 1.5, want, gradsOf(t, params))
		e.SetEager(eager)
		x := mlpBatch(t)
		require.NoError(t, x.MoveToDevice(e, residency.Persistent))
		loss := mlpLoss(t, e, params, x, mlpLabels, e.Relu) // no zero_grad: backward would add
		require.NoError(t, e.Assign(x, mlpBatch(t)))
		sums := 0
		e.beforeCompute = func(g *ggmlcgo.Graph) {
			for _, n := range g.Nodes() {
				if n.Name() == "all_reduce_mean" {
					sums++
				}
			}
		}
		_, err := e.Backward(loss)
		require.ErrorContains(t, err, "changed in place")
		assertScaled(t, 1.5, want, gradsOf(t, params)) // the gradients as they were
		assert.Zero(t, sums, "eager %v: no sum of the failed backward runs", eager)

		_, err = e.Backward(mlpLoss(t, e, params, mlpBatch(t), mlpLabels, e.Relu))
		assert.ErrorContains(t, err, "out of step with the other processes'")
		assert.ErrorContains(t, err, "changed in place", "names the first failure")
		assert.ErrorContains(t, e.FinishCollectives(), "out of step")
		assert.Zero(t, sums)

		require.NoError(t, e.SetDataParallel(nil, 0, nil, nil))
		require.NoError(t, e.SetDataParallel(params, 2, nil, scaleCollective(t, 3)))
		mlpBackward(t, e, params, false)
		got := gradsOf(t, params)
		assert.Equal(t, len(params), sums, "eager %v: one sum per bucket", eager)
		assertScaled(t, 1.5, want, got)
		require.NoError(t, e.FinishCollectives())
	}
}

// TestDataParallelOffAfterAPersistentReset: a reset of the persistent pool
// frees the buckets, whose slices are the gradients: turning data
// parallelism off then drops those gradients (their values are gone)
// instead of failing to copy them.
func TestDataParallelOffAfterAPersistentReset(t *testing.T) {
	e, params := summingMLP(t)
	mlpBackward(t, e, params, false)
	require.NoError(t, e.Reset(residency.Persistent))
	require.NoError(t, e.SetDataParallel(nil, 0, nil, nil))
	assert.Nil(t, params[0].Grad())
}

// TestACancelledComputeDropsTheInGraphSums: a compute that fails (a
// cancelled step) after a backward queued its sums drops them and the
// gradients, which would be this process's alone, as a failed sum between
// computes does.
func TestACancelledComputeDropsTheInGraphSums(t *testing.T) {
	e, params := summingMLP(t)
	mlpBackward(t, e, params, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.SetContext(ctx)
	_, err := params[0].Grad().Float32s()
	require.Error(t, err)
	e.SetContext(context.Background())
	assert.False(t, e.dp.queued, "the sums were dropped")
	assert.Nil(t, params[0].Grad())
}

// TestABackwardThatFailsOrPanicsEndsItsSums: a gradient that fails or
// panics inside a backward that sums in its graph ends its sums (none
// stays queued, eager mode computes again), and the script's end reports
// the collectives out of step.
func TestABackwardThatFailsOrPanicsEndsItsSums(t *testing.T) {
	defer func(b int64) { graphBucketBytes = b }(graphBucketBytes)
	graphBucketBytes = 4 // a bucket per parameter: the last layer's sums queued before the failure
	for _, panics := range []bool{false, true} {
		e, params := summingMLP(t)
		relus := 0
		loss := mlpLoss(t, e, params, mlpBatch(t), mlpLabels, func(h *Tensor) (*Tensor, error) {
			h, err := e.Relu(h)
			if relus++; err == nil && relus == 1 { // the first layer's: after the last layer's sums
				h.gradFn.backward = func(*Tensor) ([]*Tensor, error) {
					if panics {
						panic("boom")
					}
					return nil, assert.AnError
				}
			}
			return h, err
		})
		func() {
			defer func() { assert.Equal(t, panics, recover() != nil) }()
			_, err := e.Backward(loss)
			assert.ErrorIs(t, err, assert.AnError)
		}()
		assert.False(t, e.summing(), "panics %v", panics)
		assert.False(t, e.dp.queued, "panics %v: a queued sum left", panics)
		cause := map[bool]string{true: "it panicked", false: assert.AnError.Error()}[panics]
		assert.ErrorContains(t, e.FinishCollectives(), cause+"), so its gradient sums are out of step")
		e.SetEager(true)
		_, err := e.Add(params[1], params[1])
		require.NoError(t, err)
		assert.Empty(t, e.pending, "panics %v: eager mode computes again", panics)
	}
}

// TestARefusedLossLeavesTheSumsInStep: a loss of the wrong shape is
// refused before anything is queued, as every process's script refuses it
// alike: the next backward averages as usual. One that reaches no
// parameter may be one process's alone (an empty batch): it leaves this
// process out of step.
func TestARefusedLossLeavesTheSumsInStep(t *testing.T) {
	e, params := summingMLP(t)
	var wide *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		wide, err = e.Mul(params[1], params[1])
		return err
	}))
	_, err := e.Backward(wide)
	require.ErrorContains(t, err, "the loss must have one element")
	mlpBackward(t, e, params, false)
	assertScaled(t, 1.5, refGrads(t), gradsOf(t, params))
	require.NoError(t, e.FinishCollectives())

	_, err = e.Backward(host(t, []int{1}, 2))
	require.ErrorContains(t, err, "does not depend on any tensor that requires grad")
	assert.ErrorContains(t, e.FinishCollectives(), "out of step")
}
