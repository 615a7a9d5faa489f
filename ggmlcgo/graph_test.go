package ggmlcgo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGraphOfIsExpandOfEveryRoot: GraphOf's graph has the nodes, in the
// order, that Expand on each root gives (roots sharing ancestry, a root
// that is another's input), computes the same, holds no room for more than
// the roots reach, and refuses a nil root.
func TestGraphOfIsExpandOfEveryRoot(t *testing.T) {
	b := cpu(t, 1)
	ctx, err := NewContext(16, 0)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{{1, 2, 3}, {10, 20, 30}}, []int64{3}, []int64{3})
	sum, err := ctx.Add(in[0], in[1])
	require.NoError(t, err)
	scaled, err := ctx.Scale(sum, 2)
	require.NoError(t, err)
	prod, err := ctx.Mul(sum, in[1])
	require.NoError(t, err)
	roots := []Tensor{scaled, sum, prod}

	ref, err := NewContext(0, 32)
	require.NoError(t, err)
	defer ref.Free()
	want, err := ref.NewGraph(32)
	require.NoError(t, err)
	for _, r := range roots {
		require.NoError(t, want.Expand(r))
	}
	g, gctx, err := GraphOf(roots)
	require.NoError(t, err)
	defer gctx.Free()
	assert.Equal(t, want.Nodes(), g.Nodes())
	assert.Len(t, g.seen, 5, "two inputs and three results")
	assert.Equal(t, len(g.seen)+8, g.size)

	// The graph's tensors need memory of their own to compute.
	buf, err := b.BufferType().Alloc(4096)
	require.NoError(t, err)
	defer buf.Free()
	alloc := NewTallocr(buf)
	for _, n := range g.Nodes() {
		require.NoError(t, alloc.Alloc(n))
	}
	require.NoError(t, b.Compute(g))
	out := make([]byte, 12)
	require.NoError(t, prod.Get(out))
	assert.Equal(t, []float32{110, 440, 990}, bytesf32(out))

	_, _, err = GraphOf([]Tensor{scaled, {}})
	assert.Error(t, err)
}

// MulInplace writes the product into its first operand's memory (the
// result is a view of it), broadcasting the second, and refuses a second
// operand that does not broadcast.
func TestMulInplaceWritesItsOperand(t *testing.T) {
	b := cpu(t, 1)
	ctx, err := NewContext(8, 0)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{{1, 2, 3}, {0.5}}, []int64{3}, []int64{1})
	y, err := ctx.MulInplace(in[0], in[1])
	require.NoError(t, err)
	assert.True(t, y.IsView())
	assert.Equal(t, in[0], y.ViewSrc())
	require.NoError(t, y.InitView())
	g, gctx, err := GraphOf([]Tensor{y})
	require.NoError(t, err)
	defer gctx.Free()
	require.NoError(t, b.Compute(g))
	out := make([]byte, 12)
	require.NoError(t, in[0].Get(out))
	assert.Equal(t, []float32{0.5, 1, 1.5}, bytesf32(out))

	_, err = ctx.MulInplace(in[1], in[0])
	assert.ErrorContains(t, err, "mul_inplace: cannot broadcast")
}
