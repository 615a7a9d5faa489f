package ggmlcgo

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheCPURunsGGLUAsKernels: the probe a device's library is asked
// (does it compute gglua's custom nodes?) says yes for the CPU backend,
// which computes every custom node, and HasKernel agrees.
func TestTheCPURunsGGLUAsKernels(t *testing.T) {
	b := cpu(t, 1)
	for k, has := range b.probeKernels() {
		assert.True(t, has, "kernel set %d", k)
		assert.True(t, b.HasKernel(Kernel(k)), "kernel set %d", k)
	}
	assert.False(t, b.HasKernel(Kernel(len(kernelNodes))), "no such kernel set")
}

// TestBiasReluIsAddThenRelu: gglua's bias_relu kernel gives ggml's add of
// a bias row then gglua's relu (NaN kept, -0 and negatives to +0), and
// refuses a bias that is not one row of the operand's ne0.
func TestBiasReluIsAddThenRelu(t *testing.T) {
	b := cpu(t, 2)
	ctx, err := NewContext(32, 32)
	require.NoError(t, err)
	defer ctx.Free()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	m := []float32{nan, -1, 2, inf, -inf, 0, 1, float32(math.Copysign(0, -1)), -3}
	in := place(t, b, ctx, [][]float32{m, {1, 0.5, 0}, m}, []int64{3, 3}, []int64{3}, []int64{3, 3})
	fused, err := ctx.BiasReluKernel(in[0], in[1])
	require.NoError(t, err)
	assert.Equal(t, "bias_relu", fused.Name())
	sum, err := ctx.Add(in[0], in[1])
	require.NoError(t, err)
	slow, err := ctx.ReluKernel(sum)
	require.NoError(t, err)
	_, err = ctx.BiasReluKernel(in[0], in[2])
	assert.ErrorContains(t, err, "bias_relu", "a matrix is no bias row")

	got, sv := computeBoth(t, b, ctx, fused, slow)
	assert.True(t, math.IsNaN(float64(got[0])), "NaN kept: %v", got[0])
	assert.Equal(t, []float32{0, 2, inf, 0, 0, 2, 0.5, 0}, got[1:])
	assert.Equal(t, math.Float32bits(0), math.Float32bits(got[8]), "relu(-3 + 0) is +0")
	assert.Equal(t, sv[1:], got[1:], "as ggml's add then gglua's relu")
}
