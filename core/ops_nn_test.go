package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func nnGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	lnX := []float64{1, 2, 4, -1, 0.5, 3}
	return []gradCase{
		{"softmax", []*Tensor{x(1, 2, 3)},
			// loss = softmax(x)·w; grad_i = p_i (w_i - p·w)
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.Softmax(in[0], 0)), host(t, []int{3}, 1, 0, -1)))
			},
			softmaxDot([]float64{1, 2, 3}, []float64{1, 0, -1}), [][]float64{softmaxDotGrad([]float64{1, 2, 3}, []float64{1, 0, -1})}},
		{"log_softmax dim 0", []*Tensor{host(t, []int{3, 1}, 1, 2, 3)},
			// loss = log_softmax(x)·w; grad = w - p·sum(w)
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.LogSoftmax(in[0], 0)), host(t, []int{3, 1}, 1, 0, 2)))
			},
			logSoftmaxDot([]float64{1, 2, 3}, []float64{1, 0, 2}), [][]float64{logSoftmaxDotGrad([]float64{1, 2, 3}, []float64{1, 0, 2})}},
		{"log_softmax far below the max", []*Tensor{host(t, []int{1, 4}, 0, -120, 30, 1)},
			// log(softmax) was -inf for -120, 150 below the max
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.LogSoftmax(in[0], -1)), host(t, []int{1, 4}, 1, 0.5, -1, 2)))
			},
			logSoftmaxDot([]float64{0, -120, 30, 1}, []float64{1, 0.5, -1, 2}), [][]float64{logSoftmaxDotGrad([]float64{0, -120, 30, 1}, []float64{1, 0.5, -1, 2})}},
		{"layer_norm", []*Tensor{m23(1, 2, 4, -1, 0.5, 3), x(1, 2, 3), x(0, 0, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				y, err := e.LayerNorm(in[0], in[1], in[2], 1e-5)
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(y, m23(1, -1, 2, 0.5, 3, -2)))
			},
			layerNormRef(lnX), [][]float64{refGrad(layerNormRef, lnX), nil, {1 + 0.5, -1 + 3, 2 - 2}}},
	}
}

func softmaxDot(x, w []float64) float64 {
	d := 0.0
	for i, p := range softmax(x) {
		d += p * w[i]
	}
	return d
}

func softmaxDotGrad(x, w []float64) []float64 {
	p, pw := softmax(x), softmaxDot(x, w)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = p[i] * (w[i] - pw)
	}
	return out
}

func logSoftmaxDot(x, w []float64) float64 {
	d := 0.0
	for i, l := range logSoftmaxRef(x) {
		d += l * w[i]
	}
	return d
}

// logSoftmaxRef is x - max - log(sum(exp(x - max))) in float64.
func logSoftmaxRef(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v - m - math.Log(s)
	}
	return out
}

func logSoftmaxDotGrad(x, w []float64) []float64 {
	p, sw := softmax(x), 0.0
	for _, v := range w {
		sw += v
	}
	out := make([]float64, len(x))
	for i := range x {
		out[i] = w[i] - p[i]*sw
	}
	return out
}

// layerNormRef is sum(layer_norm(x rows of 3) * w_out) with weight w, bias b.
func layerNormRef(x []float64) float64 {
	w, b, r := []float64{1, 2, 3}, []float64{0, 0, 1}, []float64{1, -1, 2, 0.5, 3, -2}
	total := 0.0
	for row := 0; row < len(x)/3; row++ {
		v := x[row*3 : row*3+3]
		mu := (v[0] + v[1] + v[2]) / 3
		va := 0.0
		for _, a := range v {
			va += (a - mu) * (a - mu) / 3
		}
		for j, a := range v {
			total += ((a-mu)/math.Sqrt(va+1e-5)*w[j] + b[j]) * r[row*3+j]
		}
	}
	return total
}

func TestNNGradients(t *testing.T) {
	runGradCases(t, nnGradCases(t), gradChecks{
		loose: []string{"layer_norm"},
	})
}

func TestDropout(t *testing.T) {
	e := newEngine(t)
	x, _ := Full(1, 100, 100)
	same, err := e.Dropout(x, 0.5, false)
	require.NoError(t, err)
	assert.Same(t, x, same, "eval mode is the identity")
	d, err := e.Dropout(x, 0.25, true)
	require.NoError(t, err)
	zeros, sum := 0, 0.0
	for _, v := range values(t, d) {
		if v == 0 {
			zeros++
		} else {
			assert.InDelta(t, 1/0.75, v, 1e-6)
		}
		sum += float64(v)
	}
	assert.InDelta(t, 2500, zeros, 200, "about a quarter dropped")
	assert.InDelta(t, 10000, sum, 400, "the expectation is kept")
	_, err = e.Dropout(x, 1, true)
	assert.ErrorContains(t, err, "dropout")
}

var nnTorchOps = map[string]torchOp{
	"log_softmax": func(t *testing.T, e *Engine, c torchCase, in []*Tensor) (*Tensor, error) {
		var dim int
		require.True(t, c.arg(t, "dim", &dim))
		return e.LogSoftmax(in[0], dim)
	},
}

// TestNNMatchesTorch: log_softmax keeps logits far below the row's maximum
// finite (it was log(softmax), -inf past ~90 below), along every dim, with
// PyTorch's NaN for rows of -inf or NaN.
func TestNNMatchesTorch(t *testing.T) { runTorchCases(t, nnTorchOps) }
