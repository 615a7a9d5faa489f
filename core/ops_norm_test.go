package core

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// floats decodes a list argument of numbers.
func (c torchCase) floats(t *testing.T, key string) []float32 {
	var v []float64
	require.True(t, c.arg(t, key, &v), "%s: argument %s", c.Name, key)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

var normTorchOps = map[string]torchOp{
	// batch_norm: inputs x [, weight, bias]; the running statistics are
	// arguments, and in training their updated values are checked too.
	"batch_norm": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var training bool
		require.True(t, c.arg(t, "training", &training))
		rm0, rv0 := c.floats(t, "running_mean"), c.floats(t, "running_var")
		rm, rv := host(t, []int{len(rm0)}, rm0...), host(t, []int{len(rv0)}, rv0...)
		var w, b *Tensor
		if len(in) == 3 {
			w, b = in[1], in[2]
		}
		y, err := e.BatchNorm(in[0], rm, rv, w, b, BatchNormOptions{Training: training, Momentum: c.num(t, "momentum"), Eps: c.num(t, "eps")})
		if err != nil {
			return nil, err
		}
		if !strings.Contains(t.Name(), "/reference/") {
			return y, nil // gradcheck's perturbed inputs update them differently
		}
		wantM, wantV := c.floats(t, "running_mean_after"), c.floats(t, "running_var_after")
		for i := range wantM {
			assert.InDelta(t, wantM[i], values(t, rm)[i], 1e-5, "running_mean element %d", i+1)
			assert.InDelta(t, wantV[i], values(t, rv)[i], 1e-5, "running_var element %d", i+1)
		}
		return y, nil
	},
	"group_norm": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var w, b *Tensor
		if len(in) == 3 {
			w, b = in[1], in[2]
		}
		return e.GroupNorm(in[0], c.int1(t, "groups"), w, b, c.num(t, "eps"))
	},
	"rms_norm": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var shape []int
		require.True(t, c.arg(t, "normalized_shape", &shape))
		var eps *float64
		if c.arg(t, "eps", new(float64)) {
			v := c.num(t, "eps")
			eps = &v
		}
		var w *Tensor
		if len(in) == 2 {
			w = in[1]
		}
		return e.RMSNorm(in[0], shape, w, eps)
	},
}

// The small-values rms_norm case (x ~ 1e-3) is below Gradcheck's step of
// 1e-2: its reference values cover it.
func TestNormMatchesTorch(t *testing.T) {
	runConvTorchCases(t, normTorchOps, map[string]bool{"rms_norm no weight default eps small values": true})
}

func TestNormErrors(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3, 4}, make([]float32, 24)...)
	c3 := host(t, []int{3}, 1, 1, 1)
	c2 := host(t, []int{2}, 1, 1)
	for _, c := range []struct {
		name string
		f    func() (*Tensor, error)
		want []string
	}{
		{"batch_norm weight", func() (*Tensor, error) {
			return e.BatchNorm(x, nil, nil, c2, nil, BatchNormOptions{Training: true, Eps: 1e-5})
		}, []string{"batch_norm", "weight of shape 2,", "2x3x4"}},
		{"batch_norm eval without stats", func() (*Tensor, error) {
			return e.BatchNorm(x, nil, nil, nil, nil, BatchNormOptions{Eps: 1e-5})
		}, []string{"batch_norm", "running_mean"}},
		{"batch_norm one value", func() (*Tensor, error) {
			return e.BatchNorm(host(t, []int{1, 3}, 1, 2, 3), nil, nil, nil, nil, BatchNormOptions{Training: true, Eps: 1e-5})
		}, []string{"batch_norm", "more than 1 value per channel"}},
		{"group_norm groups", func() (*Tensor, error) { return e.GroupNorm(x, 2, nil, nil, 1e-5) },
			[]string{"group_norm", "groups 2", "3 channels", "2x3x4"}},
		{"group_norm bias", func() (*Tensor, error) { return e.GroupNorm(x, 3, c3, c2, 1e-5) },
			[]string{"group_norm", "bias of shape 2,"}},
		{"rms_norm shape", func() (*Tensor, error) { return e.RMSNorm(x, []int{3}, nil, nil) },
			[]string{"rms_norm", "normalized_shape [3]", "2x3x4"}},
		{"rms_norm weight", func() (*Tensor, error) { return e.RMSNorm(x, []int{4}, c3, nil) },
			[]string{"rms_norm", "weight of shape 3,"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.f()
			require.Error(t, err)
			for _, s := range c.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

// RMSNorm's fused form (ggml's rms_norm and rms_norm_back, one node each)
// and its composed form agree in value and gradient, with and without a
// weight, for rows of 64 (a device's) and of 5.
func TestRMSNormFusedAsComposed(t *testing.T) {
	defer func(c bool) { composedRMSNorm = c }(composedRMSNorm)
	for _, shape := range [][]int{{3, 7, 64}, {4, 5}} {
		n := shape[len(shape)-1]
		xs := make([]float32, numel(shape))
		for i := range xs {
			xs[i] = float32(math.Sin(float64(i)*0.37)) * 2
		}
		ws := make([]float32, n)
		for i := range ws {
			ws[i] = 1 + 0.1*float32(i%7)
		}
		eps := 1e-5
		var got [2][][]float32
		for k, composed := range []bool{false, true} {
			composedRMSNorm = composed
			e := newEngine(t)
			x, w := host(t, shape, xs...), host(t, []int{n}, ws...)
			require.NoError(t, x.SetRequiresGrad(true))
			require.NoError(t, w.SetRequiresGrad(true))
			var loss, y *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				y = e.must(e.RMSNorm(x, []int{n}, w, &eps))
				loss = e.must(e.Sum(e.must(e.Mul(y, y))))
				return nil
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			got[k] = [][]float32{values(t, y), values(t, x.Grad()), values(t, w.Grad())}
		}
		for i, what := range []string{"value", "input's gradient", "weight's gradient"} {
			for j := range got[0][i] {
				require.InDelta(t, got[1][i][j], got[0][i][j], 2e-5*(1+math.Abs(float64(got[1][i][j]))), "%v %s %d", shape, what, j)
			}
		}
	}
}
