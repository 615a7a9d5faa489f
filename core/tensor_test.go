package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

func newEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := NewEngine(EngineOptions{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	return e
}

func TestTensorRoundTripsThroughTheDevice(t *testing.T) {
	e := newEngine(t)
	x, err := FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	require.NoError(t, err)
	assert.Equal(t, "host", x.Device())
	for _, dtype := range []ggmlcgo.Type{ggmlcgo.F32, ggmlcgo.F16, ggmlcgo.BF16} {
		for _, scope := range []residency.Scope{residency.Pass, residency.Persistent} {
			d, err := x.ToDevice(e, scope, dtype)
			require.NoError(t, err)
			assert.Equal(t, "cpu", d.Device())
			assert.Equal(t, scope.String(), d.Scope())
			assert.Equal(t, []int{2, 3}, d.Shape())
			assert.Equal(t, dtype, d.Dtype())
			h, err := d.ToHost()
			require.NoError(t, err)
			got, _ := h.Float32s()
			assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, got, "%v %v", dtype, scope) // small integers are exact in f16/bf16
		}
	}
}

func TestDeviceTensorAfterItsPoolIsResetIsAnError(t *testing.T) {
	e := newEngine(t)
	x, _ := FromFloat32([]float32{1, 2}, 2)
	w, err := x.ToDevice(e, residency.Persistent, ggmlcgo.F32)
	require.NoError(t, err)
	a, err := x.ToDevice(e, residency.Pass, ggmlcgo.F32)
	require.NoError(t, err)
	e.Residency().Reset(residency.Pass)
	_, err = w.Float32s()
	assert.NoError(t, err)
	_, err = a.Float32s()
	assert.ErrorContains(t, err, "reset of the pass pool")
}

func TestTensorErrors(t *testing.T) {
	_, err := FromFloat32([]float32{1, 2, 3}, 2, 2)
	assert.ErrorContains(t, err, "3 values given for shape 2x2")
	_, err = Zeros(2, -1)
	assert.ErrorContains(t, err, "shape 2x-1")
	x, _ := Zeros(2, 2)
	_, err = x.Item()
	assert.ErrorContains(t, err, "4 elements")
	_, err = NewEngine(EngineOptions{Device: "tpu"})
	assert.ErrorContains(t, err, `device "tpu" is not available`)
	e := newEngine(t)
	_, err = x.ToDevice(e, residency.Pass, ggmlcgo.I32)
	assert.ErrorContains(t, err, "i32 tensor moves as i32 and only as i32")
	_, err = x.ToDevice(e, residency.Pass, ggmlcgo.Type(8)) // Q8_0, never a storage dtype here
	assert.ErrorContains(t, err, "unsupported storage dtype")
}
