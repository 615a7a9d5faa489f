package tests

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCollectivesAgreeAcrossRanks: under mpirun -np 2, a collective whose
// ranks pass different sizes, shapes, ops or src, or make different calls,
// or a data_parallel over models that differ, raises on both ranks an
// error naming the function, the script line, this rank's call and what
// the other rank holds, and sends nothing: MPI had given rank 1 of a
// broadcast of 3 floats into 5 "1,1,1,2,2", each rank its own answer for
// mixed ops or src, and aborted the job on different element counts. A
// rank that refuses its own call (a view) raises its own error and the
// other rank says so. The job stays in step: the calls after work. A
// module's frozen parameter (in its parameters(), not requiring grad) is
// broadcast from rank 0.
func TestCollectivesAgreeAcrossRanks(t *testing.T) {
	out, errOut, code, ranks := mpirun(t, nil, 2, "dist/agree.lua")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	const differ = "the ranks' calls differ, so nothing was sent: "
	const refused = "another rank refused its call (its own error says why), so no rank sent anything; "
	want := map[string][2]string{ // case -> each rank's error (after "agree.lua:N: ")
		"broadcast_size": {"dist.broadcast: " + differ + "this rank (0 of 2) passed a tensor of shape 3 with src 0, and the other rank has shape 5",
			"dist.broadcast: " + differ + "this rank (1 of 2) passed a tensor of shape 5 with src 0, and the other rank has shape 3"},
		"all_reduce_size": {"dist.all_reduce: " + differ + `this rank (0 of 2) passed a tensor of shape 3 with op "sum", and the other rank has shape 5`,
			"dist.all_reduce: " + differ + `this rank (1 of 2) passed a tensor of shape 5 with op "sum", and the other rank has shape 3`},
		"all_reduce_shape": {"dist.all_reduce: " + differ + `this rank (0 of 2) passed a tensor of shape 4x1 with op "sum", and the other rank has shape 2x2`,
			"dist.all_reduce: " + differ + `this rank (1 of 2) passed a tensor of shape 2x2 with op "sum", and the other rank has shape 4x1`},
		"all_gather_size": {"dist.all_gather: " + differ + "this rank (0 of 2) passed a tensor of shape 3, and the other rank has shape 5",
			"dist.all_gather: " + differ + "this rank (1 of 2) passed a tensor of shape 5, and the other rank has shape 3"},
		"op": {"dist.all_reduce: " + differ + `this rank (0 of 2) passed a tensor of shape 3 with op "sum", and another rank passed op "max"`,
			"dist.all_reduce: " + differ + `this rank (1 of 2) passed a tensor of shape 3 with op "max", and another rank passed op "sum"`},
		"src": {"dist.broadcast: " + differ + "this rank (0 of 2) passed a tensor of shape 3 with src 0, and another rank passed src 1",
			"dist.broadcast: " + differ + "this rank (1 of 2) passed a tensor of shape 3 with src 1, and another rank passed src 0"},
		"view": {"dist.all_reduce: " + refused + `this rank (0 of 2) passed a tensor of shape 3 with op "sum"`,
			"dist.all_reduce: a view of shape 3 has no memory of its own"},
		"unknown_op": {"dist.all_reduce: " + refused,
			`dist.all_reduce: argument 2: unknown reduction "prod"`},
		"call": {"dist.all_reduce: another rank called dist.broadcast where this rank (0 of 2) called dist.all_reduce",
			"dist.broadcast: another rank called dist.all_reduce where this rank (1 of 2) called dist.broadcast"},
		"barrier": {"dist.barrier: another rank called dist.all_reduce where this rank (0 of 2) called dist.barrier",
			"dist.all_reduce: another rank called dist.barrier where this rank (1 of 2) called dist.all_reduce"},
		"dp_shape": {"dist.data_parallel: " + differ + "this rank (0 of 2) passed a model with 4 parameters to average (shapes 4x3, 4, 2x4, 2), and another rank's tensors have other shapes, 38 elements in all",
			"dist.data_parallel: " + differ + "this rank (1 of 2) passed a model with 4 parameters to average (shapes 6x3, 6, 2x6, 2), and another rank's tensors have other shapes, 26 elements in all"},
		"dp_count": {"dist.data_parallel: " + differ + "this rank (0 of 2) passed a model with 2 parameters to average (shapes 2x3, 2), and another rank has 4 parameters to average",
			"dist.data_parallel: " + differ + "this rank (1 of 2) passed a model with 4 parameters to average (shapes 2x3, 2, 2x2, 2), and another rank has 2 parameters to average"},
		"dp_buffers": {"another rank has 3 other tensors (buffers)",
			"and 3 other tensors (1.num_batches_tracked 1, 1.running_mean 2, 1.running_var 2), and another rank has 2 parameters to average; another rank has 0 other tensors (buffers)"},
		"dp_not_a_param": {"dist.data_parallel: " + refused + "this rank (0 of 2) passed a model with 1 parameter to average (shapes 2)",
			"dist.data_parallel: argument 1: parameter 1 (shape 2) is not a leaf that requires grad (tensor.param makes one)"},
	}
	line := regexp.MustCompile(`^dist/agree\.lua:\d+: `)
	for r := range 2 {
		lines := ranks.rankLines(t, r)
		for name, errs := range want {
			got := field(t, lines, name)
			assert.Regexp(t, line, got, "rank %d, %s: the script line", r, name)
			assert.Contains(t, got, errs[r], "rank %d, %s", r, name)
		}
		assert.Len(t, lines, len(want)+4, "rank %d: one line a case, then the four below", r)
		r0 := ranks.rankLines(t, 0)
		assert.Equal(t, field(t, r0, "frozen_before"), field(t, lines, "frozen_after"), "rank %d: a frozen parameter is rank 0's", r)
		// all_gather's tensors take a collective, and the ranks are still in step
		assert.Equal(t, "1,2 4,8", field(t, lines, "gathered"), "rank %d", r)
		assert.Equal(t, "3,6", field(t, lines, "in step"), "rank %d", r)
	}
}

// TestDataParallelKeepsEveryModel: an encoder and then a head each wrapped
// by dist.data_parallel both stay averaged (the second call used to replace
// the first's parameters), and data_parallel gives every rank rank 0's
// buffers (BatchNorm's running statistics, used here in eval mode) as well
// as its parameters: both ranks end with the weights one process reaches on
// the whole batches.
func TestDataParallelKeepsEveryModel(t *testing.T) {
	alone, errAlone, code := runJob(t, nil, gglua, "dist/two_models.lua")
	require.Equal(t, 0, code, errAlone)
	aloneLines := strings.Split(strings.TrimSpace(alone), "\n")
	want := floats(t, field(t, aloneLines, "W"))
	out, errOut, code, ranks := mpirun(t, nil, 2, "dist/two_models.lua")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for r := range 2 {
		lines := ranks.rankLines(t, r)
		assert.Equal(t, field(t, aloneLines, "B"), field(t, lines, "B"), "rank %d: running statistics after data_parallel", r)
		got := floats(t, field(t, lines, "W"))
		require.Len(t, got, len(want))
		for i := range want {
			assert.InDelta(t, want[i], got[i], 1e-5, "rank %d: weight %d", r, i)
		}
	}
}
