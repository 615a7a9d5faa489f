package ggmlcgo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PlaceAt puts tensors where the caller says, so that a region given back
// can be given to another tensor; everything ggml would assert is an error.
func TestPlaceAtPutsATensorAtAnOffset(t *testing.T) {
	b := cpu(t, 1)
	ctx, err := NewContext(8, 0)
	require.NoError(t, err)
	defer ctx.Free()
	buf, err := b.BufferType().Alloc(4096)
	require.NoError(t, err)
	defer buf.Free()

	first, align := buf.FirstOffset(), buf.Alignment()
	require.Positive(t, align)
	assert.True(t, first >= 0 && first < align)
	x, err := ctx.NewTensor(F32, []int64{4})
	require.NoError(t, err)
	y, err := ctx.NewTensor(F32, []int64{4})
	require.NoError(t, err)
	size := buf.TensorSize(x)
	assert.Equal(t, int64(0), size%align)
	assert.GreaterOrEqual(t, size, int64(16))

	// y first, at the second slot; then x at the first: any order.
	require.NoError(t, buf.PlaceAt(y, first+size))
	require.NoError(t, buf.PlaceAt(x, first))
	require.NoError(t, x.Set(f32bytes(1, 2, 3, 4)))
	require.NoError(t, y.Set(f32bytes(5, 6, 7, 8)))
	// A CPU buffer is host memory: the values sit where they were placed.
	mem := buf.Bytes()
	assert.Equal(t, f32bytes(1, 2, 3, 4), mem[first:first+16])
	assert.Equal(t, f32bytes(5, 6, 7, 8), mem[first+size:first+size+16])

	z, err := ctx.NewTensor(F32, []int64{4})
	require.NoError(t, err)
	v, err := ctx.View(x, [MaxDims]int64{2, 1, 1, 1}, [MaxDims - 1]int64{8, 8, 8}, 0)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		t   Tensor
		off int64
		msg string
	}{
		"placed":     {x, first + 2*size, "already placed"},
		"view":       {v, first + 2*size, "is a view"},
		"nil":        {Tensor{}, first, "nil tensor"},
		"misaligned": {z, first + 4, "not aligned"},
		"negative":   {z, -align, "do not fit"},
		"past end":   {z, buf.Size() - size + align, "do not fit"},
		"huge":       {z, 1 << 62, "do not fit"},
	} {
		assert.ErrorContains(t, buf.PlaceAt(c.t, c.off), c.msg, name)
	}
	assert.False(t, z.Allocated(), "a refused tensor stays unplaced")
	assert.ErrorContains(t, Buffer{}.PlaceAt(z, 0), "no buffer")
	// The last aligned slot that fits is accepted.
	last := first + (buf.Size()-first-size)/align*align
	require.NoError(t, buf.PlaceAt(z, last))
	require.NoError(t, z.Set(f32bytes(9, 9, 9, 9)))
}
