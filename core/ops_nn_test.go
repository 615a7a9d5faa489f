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
		// LayerNorm is one op with its own gradient: every input's gradient
		// is checked against central differences of a float64 reference,
		// with and without weight and bias, on 3-d input, and on a
		// transposed view read through a transposed gradient.
		lnCase(t, "layer_norm 3-d, no affine", []int{2, 2, 3}, lnX3, nil, nil, false),
		lnCase(t, "layer_norm weight only", []int{2, 3}, lnX, []float64{0.5, -2, 1.5}, nil, false),
		lnCase(t, "layer_norm bias only", []int{2, 3}, lnX, nil, []float64{1, 0, -3}, false),
		lnCase(t, "layer_norm of a narrowed view", []int{4, 3}, lnX4, []float64{2, 1, -1}, []float64{0.5, 0.5, 0}, true),
	}
}

var (
	lnX3 = []float64{1, 2, 4, -1, 0.5, 3, 0, 0, 1, 2, -2, 7}
	lnX4 = []float64{1, 2, 4, -1, 0.5, 3, 0, 0.25, 1, 2, -2, 7}
)

// lnCase is loss = sum(layer_norm(x) * r) over rows of 3 for x of shape,
// with weight w and bias b where given (nil: none); strided passes x [rows,
// 3] as columns 2..4 of a [rows, 5] tensor (a narrowed view, whose rows are
// not packed) and multiplies r through a transposed view of the result.
func lnCase(t *testing.T, name string, shape []int, x, w, b []float64, strided bool) gradCase {
	rv := make([]float64, len(x))
	for i := range rv {
		rv[i] = float64(i%5) - 1.5
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, a := range v {
			out[i] = float32(a)
		}
		return out
	}
	rows, n := len(x)/3, 3
	wide := make([]float64, rows*5) // x in columns 1..3 (0-based) of [rows, 5]
	for i := range rows {
		wide[i*5] = 9
		copy(wide[i*5+1:i*5+4], x[i*n:i*n+n])
		wide[i*5+4] = -9
	}
	inputs := []*Tensor{host(t, shape, f32(x)...)}
	if strided {
		inputs[0] = host(t, []int{rows, 5}, f32(wide)...)
	}
	params := [][]float64{x}
	for _, p := range [][]float64{w, b} {
		if p != nil {
			inputs = append(inputs, host(t, []int{n}, f32(p)...))
			params = append(params, p)
		}
	}
	loss := func(ps [][]float64) float64 {
		xs, k := ps[0], 1
		var wp, bp []float64
		if w != nil {
			wp, k = ps[k], k+1
		}
		if b != nil {
			bp = ps[k]
		}
		total := 0.0
		for row := range rows {
			v := xs[row*n : row*n+n]
			mu := (v[0] + v[1] + v[2]) / 3
			va := 0.0
			for _, a := range v {
				va += (a - mu) * (a - mu) / 3
			}
			for j, a := range v {
				y := (a - mu) / math.Sqrt(va+1e-5)
				if wp != nil {
					y *= wp[j]
				}
				if bp != nil {
					y += bp[j]
				}
				total += y * rv[row*n+j]
			}
		}
		return total
	}
	want := make([][]float64, len(params))
	for i := range params {
		g := refGrad(func(v []float64) float64 {
			ps := append([][]float64(nil), params...)
			ps[i] = v
			return loss(ps)
		}, params[i])
		if i == 0 && strided { // the gradient of the wide tensor: 0 outside x
			gw := make([]float64, rows*5)
			for r := range rows {
				copy(gw[r*5+1:r*5+4], g[r*n:r*n+n])
			}
			g = gw
		}
		want[i] = g
	}
	return gradCase{name, inputs, func(e *Engine, in []*Tensor) (*Tensor, error) {
		xin, k := in[0], 1
		var wt, bt *Tensor
		if w != nil {
			wt, k = in[k], k+1
		}
		if b != nil {
			bt = in[k]
		}
		r := host(t, shape, f32(rv)...)
		if strided {
			xin = e.must(e.Narrow(xin, 1, 1, 3))
			rt := make([]float64, len(rv))
			for i := range rows {
				for j := range n {
					rt[j*rows+i] = rv[i*n+j]
				}
			}
			r = e.must(e.Transpose(host(t, []int{n, rows}, f32(rt)...), 0, 1))
		}
		y, err := e.LayerNorm(xin, wt, bt, 1e-5)
		if err != nil {
			return nil, err
		}
		if strided { // the product through transposed views: g reaches y transposed
			return sumOf(e)(e.Mul(e.must(e.Transpose(y, 0, 1)), e.must(e.Transpose(r, 0, 1))))
		}
		return sumOf(e)(e.Mul(y, r))
	}, loss(params), want}
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
		loose: []string{"layer_norm", "layer_norm 3-d, no affine", "layer_norm weight only", "layer_norm bias only", "layer_norm of a narrowed view"},
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
	// p = 1 drops everything, as PyTorch: x times zeros (NaN stays NaN),
	// and so does the gradient.
	y := host(t, []int{3}, 1, float32(math.NaN()), -2)
	require.NoError(t, y.SetRequiresGrad(true))
	var all, loss *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		var err error
		if all, err = e.Dropout(y, 1, true); err == nil {
			loss, err = e.Sum(all)
		}
		return err
	}))
	v := values(t, all)
	assert.Equal(t, float32(0), v[0])
	assert.True(t, math.IsNaN(float64(v[1])))
	assert.Equal(t, float32(0), v[2])
	_, err = e.Backward(loss)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 0}, values(t, y.Grad()))
	_, err = e.Dropout(x, 1.5, true)
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

// TestComposedLayerNorm: LayerNorm composed of ggml's ops (where a device
// lacks gglua's fused nodes) passes LayerNorm's gradient cases and PyTorch
// references; TestRMSLayerNorm: so does the devices' composition (the RMS
// norm of the centred rows, and its fused gradient), forced on the CPU.
func TestComposedLayerNorm(t *testing.T) {
	runForced(t, &forceComposedLayerNorm, TestNNGradients, TestNNMatchesTorch)
}

func TestRMSLayerNorm(t *testing.T) {
	forceComposedLayerNorm = true
	defer func() { forceComposedLayerNorm = false }()
	runForced(t, &forceRMSLayerNorm, TestNNGradients, TestNNMatchesTorch)
}
