package ggmlcgo

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnaryOpsByName computes ops of GGLUA_UNARY_OPS through Unary and
// compares them with Go's math: the names, their numbering and the C
// dispatch must agree. (Each op is also checked, with its gradient, by its
// core test; a new op need not be listed here.)
func TestUnaryOpsByName(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	step := func(x float64) float64 {
		if x > 0 {
			return 1
		}
		return 0
	}
	sgn := func(x float64) float64 { return step(x) - step(-x) }
	want := map[string]func(float64) float64{
		"exp": math.Exp, "expm1": math.Expm1, "log": math.Log, "sqrt": math.Sqrt,
		"sqr": func(x float64) float64 { return x * x }, "abs": math.Abs, "sgn": sgn, "step": step,
		"relu": func(x float64) float64 { return math.Max(x, 0) }, "sigmoid": sig, "tanh": math.Tanh,
		"silu":     func(x float64) float64 { return x * sig(x) },
		"gelu_erf": func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, "floor": math.Floor,
	}
	require.GreaterOrEqual(t, len(unaryOps), len(want))
	b := cpu(t, 1)
	in := []float32{0.5, -1.5, 3.25, -0.125} // log and sqrt give NaN for the negatives, as Go does
	for name, f := range want {
		t.Run(name, func(t *testing.T) {
			ctx, err := NewContext(4, 4)
			require.NoError(t, err)
			defer ctx.Free()
			x := place(t, b, ctx, [][]float32{in}, []int64{4})[0]
			y, err := ctx.Unary(name, x)
			require.NoError(t, err)
			g, err := ctx.NewGraph(4)
			require.NoError(t, err)
			require.NoError(t, g.Expand(y))
			ga := NewGallocr(b.BufferType())
			defer ga.Free()
			require.NoError(t, ga.AllocGraph(g))
			require.NoError(t, b.Compute(g))
			out := make([]byte, y.Nbytes())
			require.NoError(t, y.Get(out))
			for i, v := range bytesf32(out) {
				ref := f(float64(in[i]))
				if math.IsNaN(ref) {
					assert.True(t, math.IsNaN(float64(v)), "%s(%g) = %g, want NaN", name, in[i], v)
					continue
				}
				assert.InDelta(t, ref, float64(v), 1e-5*math.Max(1, math.Abs(ref)), "%s(%g)", name, in[i])
			}
		})
	}
}

func TestUnknownUnaryOpIsAnError(t *testing.T) {
	ctx, err := NewContext(4, 4)
	require.NoError(t, err)
	defer ctx.Free()
	x, err := ctx.NewTensor(F32, []int64{2})
	require.NoError(t, err)
	_, err = ctx.Unary("no_such_op", x)
	assert.ErrorContains(t, err, "not one of ggml's unary ops")
}
