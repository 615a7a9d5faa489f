package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
