package ggmlcgo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAllReduceAveragesInPlace: an all_reduce_mean node changes its operand, a
// buffer outside the graph's, in place with the collective's mean: its sum
// (here times 3, as three processes holding the same values would sum)
// over its processes (here 2), on every thread count; a strided operand or
// no collective is refused.
func TestAllReduceAveragesInPlace(t *testing.T) {
	for _, threads := range []int{1, 2} {
		b := cpu(t, threads)
		ctx, err := NewContext(32, 32)
		require.NoError(t, err)
		defer ctx.Free()
		in := place(t, b, ctx, [][]float32{{1, -2, 3.5, 0}, {7}}, []int64{4}, []int64{1})
		coll, free, err := NewScaleCollective(3, 2)
		require.NoError(t, err)
		defer free()
		sum, err := ctx.AllReduceMean(in[0], coll)
		require.NoError(t, err)
		assert.Equal(t, "all_reduce_mean", sum.Name())
		join, err := ctx.AllReduceJoin(sum, coll)
		require.NoError(t, err)
		assert.Equal(t, "all_reduce_join", join.Name())
		_, err = ctx.AllReduceMean(in[0], nil)
		assert.ErrorContains(t, err, "no collective")
		wide, err := ctx.NewTensor(F32, []int64{2, 2})
		require.NoError(t, err)
		column, err := ctx.View(wide, [MaxDims]int64{1, 2, 1, 1}, [MaxDims - 1]int64{8, 16, 16}, 0)
		require.NoError(t, err)
		_, err = ctx.AllReduceMean(column, coll)
		assert.ErrorContains(t, err, "all_reduce_mean: the kernel needs a contiguous operand")

		_, _ = computeBoth(t, b, ctx, join, in[1])
		got := make([]byte, in[0].Nbytes())
		require.NoError(t, in[0].Get(got))
		assert.Equal(t, []float32{1.5, -3, 5.25, 0}, bytesf32(got), "threads %d", threads)
		kind, code := CollectiveError(coll)
		assert.Zero(t, kind)
		assert.Zero(t, code)
	}
}

// TestAllReduceWithoutProcessesFails: a collective that names no
// processes records a host failure instead of dividing by zero, and
// leaves its operand as it was.
func TestAllReduceWithoutProcessesFails(t *testing.T) {
	b := cpu(t, 1)
	ctx, err := NewContext(32, 32)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{{1, -2}, {7}}, []int64{2}, []int64{1})
	coll, free, err := NewScaleCollective(3, 0)
	require.NoError(t, err)
	defer free()
	sum, err := ctx.AllReduceMean(in[0], coll)
	require.NoError(t, err)
	_, _ = computeBoth(t, b, ctx, sum, in[1])
	got := make([]byte, in[0].Nbytes())
	require.NoError(t, in[0].Get(got))
	assert.Equal(t, []float32{1, -2}, bytesf32(got))
	kind, code := CollectiveError(coll)
	assert.Equal(t, CollectiveHost, kind)
	assert.Equal(t, -1, code)
}
