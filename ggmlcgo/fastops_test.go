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

// TestBiasReluFusesALinearLayersAdd: relu of ggml's add of a matrix and a
// bias row is one bias_relu node with the add's operands, equal to the add
// then relu (NaN kept, -0 and negatives to +0); an add of two matrices, or
// a leaf, is not fused.
func TestBiasReluFusesALinearLayersAdd(t *testing.T) {
	b := cpu(t, 2)
	ctx, err := NewContext(32, 32)
	require.NoError(t, err)
	defer ctx.Free()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	m := []float32{nan, -1, 2, inf, -inf, 0, 1, float32(math.Copysign(0, -1)), -3}
	in := place(t, b, ctx, [][]float32{m, {1, 0.5, 0}, m}, []int64{3, 3}, []int64{3}, []int64{3, 3})
	sum, err := ctx.Add(in[0], in[1])
	require.NoError(t, err)
	fused, ok, err := ctx.BiasReluKernel(sum)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "bias_relu", fused.Name())
	slow, err := ctx.ReluKernel(sum)
	require.NoError(t, err)
	for _, x := range []Tensor{in[0]} {
		_, ok, err := ctx.BiasReluKernel(x)
		require.NoError(t, err)
		assert.False(t, ok, "a leaf")
	}
	both, err := ctx.Add(in[0], in[2])
	require.NoError(t, err)
	_, ok, err = ctx.BiasReluKernel(both)
	require.NoError(t, err)
	assert.False(t, ok, "two matrices")

	g, err := ctx.NewGraph(32)
	require.NoError(t, err)
	require.NoError(t, g.Expand(fused))
	require.NoError(t, g.Expand(slow))
	ga := NewGallocr(b.BufferType())
	defer ga.Free()
	require.NoError(t, ga.AllocGraph(g))
	require.NoError(t, b.Compute(g))
	fv, sv := make([]byte, fused.Nbytes()), make([]byte, slow.Nbytes())
	require.NoError(t, fused.Get(fv))
	require.NoError(t, slow.Get(sv))
	got := bytesf32(fv)
	assert.Equal(t, math.Float32bits(0), math.Float32bits(got[5]), "relu(0 + 0) is +0")
	assert.Equal(t, math.Float32bits(0), math.Float32bits(got[8]), "relu(-3 + 0) is +0")
	want := []float32{nan, 0, 2, inf, 0, 0, 2, 0.5, 0}
	for i := range want {
		assert.Equal(t, math.Float32bits(want[i]) == math.Float32bits(nan), math.IsNaN(float64(got[i])), "element %d", i)
		if !math.IsNaN(float64(want[i])) {
			assert.Equal(t, want[i], got[i], "element %d", i)
		}
	}
	assert.Equal(t, bytesf32(sv)[1:], got[1:], "as ggml's add then gglua's relu")
}
