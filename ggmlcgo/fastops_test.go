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
	fused, err := ctx.BiasReluKernel(in[0], in[1], F32)
	require.NoError(t, err)
	assert.Equal(t, "bias_relu", fused.Name())
	sum, err := ctx.Add(in[0], in[1])
	require.NoError(t, err)
	slow, err := ctx.ReluKernel(sum)
	require.NoError(t, err)
	_, err = ctx.BiasReluKernel(in[0], in[2], F32)
	assert.ErrorContains(t, err, "bias_relu", "a matrix is no bias row")

	got, sv := computeBoth(t, b, ctx, fused, slow)
	assert.True(t, math.IsNaN(float64(got[0])), "NaN kept: %v", got[0])
	assert.Equal(t, []float32{0, 2, inf, 0, 0, 2, 0.5, 0}, got[1:])
	assert.Equal(t, math.Float32bits(0), math.Float32bits(got[8]), "relu(-3 + 0) is +0")
	assert.Equal(t, sv[1:], got[1:], "as ggml's add then gglua's relu")
}

// TestGemmBF16IsTheProductOfRoundedOperands: gglua's bf16 gemm, every
// transpose, is the f32 sum of the products of its operands rounded to
// bf16 (worked out here in float64 from Go's own rounding), an operand
// stored as bf16 is taken as it is, and shapes that do not multiply are
// refused.
func TestGemmBF16IsTheProductOfRoundedOperands(t *testing.T) {
	const m, k, n = 5, 37, 3 // k long enough that rounding shows
	wave := func(len, seed int) []float32 {
		v := make([]float32, len)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*29+seed)*0.77)) * 1.3
		}
		return v
	}
	round := func(f float32) float64 { // to nearest bf16, ties to even
		u := math.Float32bits(f)
		u = (u + 0x7fff + (u>>16)&1) &^ 0xffff
		return float64(math.Float32frombits(u))
	}
	av, bv := wave(m*k, 1), wave(k*n, 2)
	want := make([]float32, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				s += round(av[i*k+l]) * round(bv[l*n+j])
			}
			want[i*n+j] = float32(s)
		}
	}
	// transpose returns the rows x cols matrix v (row-major) transposed.
	transpose := func(v []float32, rows, cols int) []float32 {
		out := make([]float32, len(v))
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				out[c*rows+r] = v[r*cols+c]
			}
		}
		return out
	}
	b := cpu(t, 2)
	for _, c := range []struct{ ta, tb, bf16 bool }{{false, false, false}, {false, true, false}, {true, false, false}, {true, true, false}, {false, true, true}} {
		ctx, err := NewContext(16, 16)
		require.NoError(t, err)
		ad, ane := av, []int64{k, m}
		if c.ta {
			ad, ane = transpose(av, m, k), []int64{m, k}
		}
		bd, bne := bv, []int64{n, k}
		if c.tb {
			bd, bne = transpose(bv, k, n), []int64{k, n}
		}
		in := place(t, b, ctx, [][]float32{ad, bd}, ane, bne)
		a := in[0]
		if c.bf16 {
			a, err = ctx.Cast(a, BF16)
			require.NoError(t, err)
		}
		y, err := ctx.GemmBF16(a, in[1], c.ta, c.tb, [MaxDims]int64{n, m, 1, 1})
		require.NoError(t, err)
		got, _ := computeBoth(t, b, ctx, y, y)
		assert.InDeltaSlice(t, want, got, 1e-5, "ta %v, tb %v, bf16 a %v", c.ta, c.tb, c.bf16)
		ctx.Free()
	}
	// The f32 product differs: the test tells rounding apart.
	var exact float64
	for l := 0; l < k; l++ {
		exact += float64(av[l]) * float64(bv[l*n])
	}
	assert.Greater(t, math.Abs(exact-float64(want[0])), 1e-3)

	ctx, err := NewContext(16, 16)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{av, bv}, []int64{k, m}, []int64{n, k})
	_, err = ctx.GemmBF16(in[0], in[1], false, true, [MaxDims]int64{n, m, 1, 1})
	assert.ErrorContains(t, err, "cannot multiply", "op(b) must be [K, N]")
	_, err = ctx.GemmBF16(in[0], in[1], false, false, [MaxDims]int64{n, m + 1, 1, 1})
	assert.ErrorContains(t, err, "cannot multiply", "the result's rows are op(a)'s")
	every2nd, err := ctx.View(in[0], [MaxDims]int64{k, 2, 1, 1}, [MaxDims - 1]int64{4, 8 * k, 8 * k * 2}, 0)
	require.NoError(t, err)
	_, err = ctx.GemmBF16(every2nd, in[1], false, false, [MaxDims]int64{n, 2, 1, 1})
	assert.ErrorContains(t, err, "contiguous", "a strided view is refused")
}

// TestGemmBF16BiasAddsTheRowToEverySum: the bias form is the product's
// f32 sums plus the bias, bit for bit as the sums then ggml's add, and a
// bias that is not one f32 row of N is refused.
func TestGemmBF16BiasAddsTheRowToEverySum(t *testing.T) {
	const m, k, n = 4, 19, 3
	wave := func(len, seed int) []float32 {
		v := make([]float32, len)
		for i := range v {
			v[i] = float32(math.Cos(float64(i*31+seed)*0.61)) * 1.7
		}
		return v
	}
	b := cpu(t, 2)
	ctx, err := NewContext(16, 16)
	require.NoError(t, err)
	defer ctx.Free()
	in := place(t, b, ctx, [][]float32{wave(m*k, 1), wave(n*k, 2), {0.25, -3.5, 1e-3}, {1, 2}}, []int64{k, m}, []int64{k, n}, []int64{n}, []int64{2})
	fused, err := ctx.GemmBF16Bias(in[0], in[1], in[2], false, true, [MaxDims]int64{n, m, 1, 1}, F32)
	require.NoError(t, err)
	y, err := ctx.GemmBF16(in[0], in[1], false, true, [MaxDims]int64{n, m, 1, 1})
	require.NoError(t, err)
	slow, err := ctx.Add(y, in[2])
	require.NoError(t, err)
	got, want := computeBoth(t, b, ctx, fused, slow)
	assert.Equal(t, bitsOf(want), bitsOf(got))
	round := func(f float32) float64 {
		return float64(math.Float32frombits((math.Float32bits(f) + 0x7fff + (math.Float32bits(f)>>16)&1) &^ 0xffff))
	}
	av, bv, bias := wave(m*k, 1), wave(n*k, 2), []float32{0.25, -3.5, 1e-3}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				s += round(av[i*k+l]) * round(bv[j*k+l])
			}
			assert.InDelta(t, s+float64(bias[j]), got[i*n+j], 1e-5, "row %d, column %d", i, j)
		}
	}

	_, err = ctx.GemmBF16Bias(in[0], in[1], in[3], false, true, [MaxDims]int64{n, m, 1, 1}, F32)
	assert.ErrorContains(t, err, "contiguous f32 row of 3", "a bias of 2 for 3 columns")
	_, err = ctx.GemmBF16Bias(in[0], in[1], in[1], false, true, [MaxDims]int64{n, m, 1, 1}, F32)
	assert.ErrorContains(t, err, "row of 3", "a matrix is no bias")
}

// TestRoundBF16KernelIsCast: gglua's to_bf16 kernel rounds as ggml's Cast
// does, bit for bit: ties to even, past the largest bf16 to infinity,
// subnormals, -0, and NaNs (a signalling one comes back quiet).
func TestRoundBF16KernelIsCast(t *testing.T) {
	b := cpu(t, 2)
	ctx, err := NewContext(16, 16)
	require.NoError(t, err)
	defer ctx.Free()
	bits := []uint32{0x3f808000, 0x3f818000, 0x3f80c000, 0x7f7fffff, 0x00000001, 0x00018000, 0x80000000, 0x7fc00001, 0x7f800001, 0xff800000, 0xbf7fffff}
	v := make([]float32, len(bits))
	for i, u := range bits {
		v[i] = math.Float32frombits(u)
	}
	in := place(t, b, ctx, [][]float32{v}, []int64{int64(len(v))})
	r, err := ctx.RoundBF16Kernel(in[0])
	require.NoError(t, err)
	assert.Equal(t, BF16, r.Type())
	got, want := computeBoth(t, b, ctx, widened(t, ctx, r), castRounded(t, ctx, in[0]))
	assert.Equal(t, bitsOf(want), bitsOf(got), "the kernel's bits, as ggml's Cast's, for inputs %#08x", bits)
	assert.Equal(t, float32(1), got[0], "a tie goes to the even neighbour")
	assert.True(t, math.IsInf(float64(got[3]), 1), "past the largest bf16: inf")
	assert.Equal(t, uint32(0x7fc00000), math.Float32bits(got[8]), "a signalling NaN comes back quiet")
}

// TestBiasReluToBF16: bias_relu into bf16 is the f32 result rounded (bit
// for bit, as Cast rounds), and relu_back reading that bf16 result selects
// as it does from the f32 one (NaN passes, zeros block).
func TestBiasReluToBF16(t *testing.T) {
	b := cpu(t, 2)
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	// Columns add 1, 0.5 and 0. 1 + 3·2^-9 (third column) rounds up, to
	// 1 + 2^-7: truncating would not.
	a := []float32{nan, -1, 2.0078125, inf, -inf, 1.005859375, 0, float32(math.Copysign(0, -1)), 3.3333}
	g := []float32{1.005859375, 2, -3.0234375, 4, inf, 6.0703125, 7, 8, nan} // some round up in bf16
	// Each comparison in a context of its own: a graph's nodes keep the
	// memory of the allocator that placed them, freed after computeBoth.
	both := func(f func(ctx *Context, y16, y32, g Tensor) (Tensor, Tensor)) ([]float32, []float32) {
		ctx, err := NewContext(32, 32)
		require.NoError(t, err)
		t.Cleanup(ctx.Free)
		in := place(t, b, ctx, [][]float32{a, {1, 0.5, 0}, g}, []int64{3, 3}, []int64{3}, []int64{3, 3})
		y16, err := ctx.BiasReluKernel(in[0], in[1], BF16)
		require.NoError(t, err)
		assert.Equal(t, BF16, y16.Type())
		y32, err := ctx.BiasReluKernel(in[0], in[1], F32)
		require.NoError(t, err)
		_, err = ctx.BiasReluKernel(in[0], in[1], F16)
		assert.ErrorContains(t, err, "f32 or bf16")
		x, y := f(ctx, y16, y32, in[2])
		return computeBoth(t, b, ctx, x, y)
	}
	got, want := both(func(ctx *Context, y16, y32, _ Tensor) (Tensor, Tensor) {
		return widened(t, ctx, y16), castRounded(t, ctx, y32)
	})
	assert.Equal(t, bitsOf(want), bitsOf(got), "bias_relu into bf16 is the f32 result rounded")
	assert.Equal(t, float32(2), got[2], "2.0078125 rounds to 2")
	assert.Equal(t, float32(1.0078125), got[5], "1 + 3·2^-9 rounds up")
	gb16, gb32 := both(func(ctx *Context, y16, y32, g Tensor) (Tensor, Tensor) {
		back16, err := ctx.ReluBackKernel(g, y16, F32)
		require.NoError(t, err)
		back32, err := ctx.ReluBackKernel(g, y32, F32)
		require.NoError(t, err)
		return back16, back32
	})
	assert.Equal(t, bitsOf(gb32), bitsOf(gb16), "relu_back from the bf16 result")
	// The gradient into bf16 is the f32 one rounded.
	rounded, want := both(func(ctx *Context, y16, y32, g Tensor) (Tensor, Tensor) {
		back, err := ctx.ReluBackKernel(g, y16, BF16)
		require.NoError(t, err)
		back32, err := ctx.ReluBackKernel(g, y32, F32)
		require.NoError(t, err)
		return widened(t, ctx, back), castRounded(t, ctx, back32)
	})
	assert.Equal(t, bitsOf(want), bitsOf(rounded), "relu_back into bf16 is the f32 gradient rounded")
	assert.Equal(t, float32(1.0078125), rounded[0], "1 + 3·2^-9 rounds up")
	both(func(ctx *Context, y16, y32, g Tensor) (Tensor, Tensor) {
		_, err := ctx.ReluBackKernel(g, y32, BF16)
		assert.ErrorContains(t, err, "a bf16 gradient from a bf16 result", "a GPU computes it only from a bf16 result")
		return y32, y32
	})
}

// TestColumnSumKernel: gglua's column sums of an f32 or bf16 matrix (a
// bias's gradient) are the sums over its rows (a 3-d operand's rows too),
// summed in f32: hundreds of rows of values that bf16 holds exactly but
// whose sums it does not.
func TestColumnSumKernel(t *testing.T) {
	b := cpu(t, 2)
	const cols, rows = 5, 700
	v := make([]float32, cols*rows)
	want64 := make([]float64, cols)
	for i := range v {
		v[i] = float32(i%37)*0.0078125 + 1 // 1 + k·2^-7: exact in bf16
		want64[i%cols] += float64(v[i])
	}
	want := make([]float32, cols)
	for c := range want {
		want[c] = float32(want64[c])
	}
	for _, bf16 := range []bool{false, true} {
		ctx, err := NewContext(16, 16)
		require.NoError(t, err)
		in := place(t, b, ctx, [][]float32{v}, []int64{cols, rows / 7, 7})
		a := in[0]
		if bf16 {
			a, err = ctx.Cast(a, BF16)
			require.NoError(t, err)
		}
		s, err := ctx.ColumnSumKernel(a)
		require.NoError(t, err)
		assert.Equal(t, [MaxDims]int64{cols, 1, 1, 1}, s.Ne())
		got, _ := computeBoth(t, b, ctx, s, s)
		assert.InDeltaSlice(t, want, got, 1e-3, "bf16 %v", bf16) // an f32 sum: a bf16 one is off by ~4
		i32, err := ctx.NewTensor(I32, []int64{4})
		require.NoError(t, err)
		_, err = ctx.ColumnSumKernel(i32)
		assert.ErrorContains(t, err, "f32 or bf16")
		ctx.Free()
	}
}

// widened is the bf16 tensor a widened to f32 by ggml's Cast (exact), and
// castRounded is the f32 tensor a rounded to bf16 by ggml's Cast and
// widened: the references gglua's bf16 kernels are compared with.
func widened(t *testing.T, ctx *Context, a Tensor) Tensor {
	t.Helper()
	w, err := ctx.Cast(a, F32)
	require.NoError(t, err)
	return w
}

func castRounded(t *testing.T, ctx *Context, a Tensor) Tensor {
	t.Helper()
	r, err := ctx.Cast(a, BF16)
	require.NoError(t, err)
	return widened(t, ctx, r)
}

// bitsOf is v's floats as their bits, for comparisons that tell NaNs and
// the signs of zeros apart.
func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}
