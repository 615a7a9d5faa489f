package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
)

// Labels kept on the device are read once: an i32 tensor's device value
// never changes in place, so later reads (cross_entropy's, every step) use
// the host copy instead of waiting for the device's queued work.
func TestDeviceLabelsAreReadOnce(t *testing.T) {
	e := newEngine(t)
	require.NoError(t, e.backend.ComputeAsDevice())
	y, err := FromInt32([]int32{3, 1, 2}, 3)
	require.NoError(t, err)
	require.NoError(t, y.MoveToDevice(e, residency.Persistent))
	v, err := y.Float64s()
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 1, 2}, v)

	z, err := e.Scale(host(t, []int{2}, 1, 2), 2)
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	require.False(t, e.backend.Done(e.backend.Launches()))
	v, err = y.Float64s()
	require.NoError(t, err)
	assert.Equal(t, []float64{3, 1, 2}, v)
	assert.False(t, e.backend.Done(e.backend.Launches()), "the second read did not wait")
	assert.Equal(t, []float32{2, 4}, values(t, z))

	// A persistent reset makes it stale, read or not (docs/API.md).
	require.NoError(t, e.Reset(residency.Persistent))
	_, err = y.Float64s()
	assert.ErrorIs(t, err, residency.ErrStale)

}
