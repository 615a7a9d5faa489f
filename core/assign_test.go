package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

func TestAssignInPlace(t *testing.T) {
	e := newEngine(t)
	h := host(t, []int{2}, 1, 2)
	require.NoError(t, e.Assign(h, host(t, []int{2}, 5, 6)))
	assert.Equal(t, []float32{5, 6}, values(t, h))
	d, err := h.ToDevice(e, 1, 0)
	require.NoError(t, err)
	sum, err := e.Add(d, d)
	require.NoError(t, err)
	require.NoError(t, e.Assign(d, sum))
	assert.Equal(t, []float32{10, 12}, values(t, d))
	assert.ErrorContains(t, e.Assign(d, host(t, []int{3}, 1, 2, 3)), "shape")
	assert.False(t, math.IsNaN(float64(values(t, d)[0])))
}

// WriteRows updates a placed tensor's rows as part of the pending work: two
// writes and the reads after them compute in one graph, each read seeing
// the writes queued before it.
func TestWriteRows(t *testing.T) {
	e := newEngine(t)
	cache, err := e.Weight(make([]byte, 4*4*2*3), ggmlcgo.F32, []int{4, 2, 3})
	require.NoError(t, err)
	a := e.must(e.Scale(host(t, []int{1, 2, 3}, 1, 2, 3, 4, 5, 6), 2)) // pending
	b := host(t, []int{2, 2, 3}, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18)
	before := e.Stats().GraphComputes
	require.NoError(t, e.WriteRows(cache, 0, a))
	first := e.must(e.Narrow(cache, 0, 0, 1))
	sum1 := e.must(e.Sum(first))
	require.NoError(t, e.WriteRows(cache, 2, b))
	all := e.must(e.Narrow(cache, 0, 0, 4))
	got := values(t, all)
	assert.Equal(t, []float32{2, 4, 6, 8, 10, 12, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, got)
	assert.Equal(t, []float32{42}, values(t, sum1))
	assert.Equal(t, before+1, e.Stats().GraphComputes, "the writes and the reads are one graph")

	for _, c := range []struct {
		dst, src *Tensor
		start    int
		msg      string
	}{
		{cache, b, 3, "rows 4.. of shape 4x2x3 cannot take shape 2x2x3"},
		{cache, host(t, []int{1, 3, 2}, 1, 2, 3, 4, 5, 6), 0, "cannot take shape 1x3x2"},
		{host(t, []int{2}, 1, 2), host(t, []int{1}, 1), 0, "must be a placed f32 tensor"},
	} {
		assert.ErrorContains(t, e.WriteRows(c.dst, c.start, c.src), c.msg)
	}
}
