package ggmlcgo

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kernels of core's MLP under autocast: a product written in bf16 is
// its f32 result rounded, bit for bit; GELU into bf16 is ggml's gelu_erf
// rounded; GELU's gradient from a bf16 input is the f32 one at the
// rounded input, and into bf16 that rounded. Each comparison in a context
// of its own (a graph's nodes keep the memory of the allocator that placed
// them, freed after computeBoth).
func TestMLPKernelsInBF16(t *testing.T) {
	b := cpu(t, 2)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	wave := func(n, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Cos(float64(i*31+seed)*0.61)) * 2.3
		}
		return v
	}
	both := func(data [][]float32, ne [][]int64, f func(ctx *Context, in []Tensor) (Tensor, Tensor)) ([]float32, []float32) {
		ctx, err := NewContext(32, 32)
		require.NoError(t, err)
		t.Cleanup(ctx.Free)
		x, y := f(ctx, place(t, b, ctx, data, ne...))
		return computeBoth(t, b, ctx, x, y)
	}

	const m, k, n = 5, 19, 3
	got, want := both([][]float32{wave(m*k, 1), wave(n*k, 2), {0.25, -3.5, 1e-3}}, [][]int64{{k, m}, {k, n}, {n}},
		func(ctx *Context, in []Tensor) (Tensor, Tensor) {
			y16, err := ctx.GemmBF16Bias(in[0], in[1], in[2], false, true, [MaxDims]int64{n, m, 1, 1}, BF16)
			require.NoError(t, err)
			assert.Equal(t, BF16, y16.Type())
			y32, err := ctx.GemmBF16Bias(in[0], in[1], in[2], false, true, [MaxDims]int64{n, m, 1, 1}, F32)
			require.NoError(t, err)
			return widened(t, ctx, y16), castRounded(t, ctx, y32)
		})
	assert.Equal(t, bitsOf(want), bitsOf(got), "a bf16 product is the f32 one rounded")

	x := append(wave(61, 3), nan, 0, float32(math.Copysign(0, -1)), 8.5, -8.5, 1e-20, 0.0078125)
	got, want = both([][]float32{x}, [][]int64{{int64(len(x))}}, func(ctx *Context, in []Tensor) (Tensor, Tensor) {
		y16, err := ctx.GeluBF16Kernel(in[0])
		require.NoError(t, err)
		assert.Equal(t, BF16, y16.Type())
		ref, err := ctx.Unary("gelu_erf", in[0])
		require.NoError(t, err)
		return widened(t, ctx, y16), castRounded(t, ctx, ref)
	})
	for i := range x {
		if math.IsNaN(float64(want[i])) {
			assert.True(t, math.IsNaN(float64(got[i])), "gelu(%g): NaN, got %g", x[i], got[i])
			continue
		}
		// Φ by Abramowitz-Stegun (1.5e-7) against ggml's erf: at most one
		// bf16 step apart, where the f32 value lies near a rounding tie.
		assert.InDelta(t, want[i], got[i], math.Abs(float64(want[i]))/128+1e-30, "gelu(%g)", x[i])
	}

	g := append(wave(61, 4), 1, inf, 2, 3, nan, 5, 6)
	for _, out := range []Type{F32, BF16} {
		got, want = both([][]float32{g, x}, [][]int64{{int64(len(g))}, {int64(len(x))}}, func(ctx *Context, in []Tensor) (Tensor, Tensor) {
			x16, err := ctx.Cast(in[1], BF16)
			require.NoError(t, err)
			d, err := ctx.GeluErfBackKernel(in[0], x16, out)
			require.NoError(t, err)
			assert.Equal(t, out, d.Type())
			ref, err := ctx.GeluErfBackKernel(in[0], widened(t, ctx, x16), F32)
			require.NoError(t, err)
			if out == BF16 {
				return widened(t, ctx, d), castRounded(t, ctx, ref)
			}
			return d, ref
		})
		assert.Equal(t, bitsOf(want), bitsOf(got), "gelu_back into %s from a bf16 input", out)
	}

	ctx, err := NewContext(8, 8)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{{1, 2}, {1, 2}}, []int64{2}, []int64{2})
	_, err = ctx.GemmBF16Bias(in[0], in[1], in[1], false, true, [MaxDims]int64{1, 1, 1, 1}, F16)
	assert.ErrorContains(t, err, "f32 or bf16", "a product into f16")
	_, err = ctx.GeluErfBackKernel(in[0], in[1], I32)
	assert.ErrorContains(t, err, "f32 or bf16")
}
