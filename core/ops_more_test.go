package core

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/ggmlcgo"
)

// refGrad is the gradient of f at x by central differences in float64: an
// independent reference for ops whose gradient has no short closed form.
func refGrad(f func([]float64) float64, x []float64) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		h := 1e-6
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		out[i] = (f(xp) - f(xm)) / (2 * h)
	}
	return out
}

func geluRef(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
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

func moreGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	xs := []float64{0.5, -1.5, 2}
	geluGrad := refGrad(func(v []float64) float64 { return geluRef(v[0]) + geluRef(v[1]) + geluRef(v[2]) }, xs)
	lnX := []float64{1, 2, 4, -1, 0.5, 3}
	return []gradCase{
		{"max dim 1", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.MaxDim(in[0], 1, false)), host(t, []int{2}, 1, 2)))
			},
			15, [][]float64{{0, 0, 1, 0, 0, 2}}},
		{"max dim 0", []*Tensor{m23(1, 5, 3, 4, 2, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.MaxDim(in[0], 0, false)) },
			4 + 5 + 6, [][]float64{{0, 1, 0, 1, 0, 1}}},
		{"min", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.Min(in[0]) },
			-1.5, [][]float64{{0, 1, 0}}},
		{"gelu", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Gelu(in[0])) },
			geluRef(0.5) + geluRef(-1.5) + geluRef(2), [][]float64{geluGrad}},
		{"layer_norm", []*Tensor{m23(1, 2, 4, -1, 0.5, 3), x(1, 2, 3), x(0, 0, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				y, err := e.LayerNorm(in[0], in[1], in[2], 1e-5)
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(y, m23(1, -1, 2, 0.5, 3, -2)))
			},
			layerNormRef(lnX), [][]float64{refGrad(layerNormRef, lnX), nil, {1 + 0.5, -1 + 3, 2 - 2}}},
		{"narrow", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.Narrow(in[0], 1, 1, 2)), host(t, []int{2, 2}, 1, 2, 3, 4)))
			},
			47, [][]float64{{0, 1, 2, 0, 3, 4}}},
		{"cat", []*Tensor{x(1, 2), x(3)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.Cat(in, 0)), x(1, 2, 3)))
			},
			14, [][]float64{{1, 2}, {3}}},
		{"index_select", []*Tensor{host(t, []int{3, 2}, 1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				return sumOf(e)(e.Mul(e.must(e.IndexSelect(in[0], 0, []int{2, 0, 2})), host(t, []int{3, 2}, 1, 1, 2, 2, 3, 3)))
			},
			50, [][]float64{{2, 2, 0, 0, 4, 4}}},
		{"batched matmul", []*Tensor{host(t, []int{2, 1, 2}, 1, 2, 3, 4), host(t, []int{2, 2, 1}, 1, 1, 2, 0)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Matmul(in[0], in[1])) },
			9, [][]float64{{1, 1, 2, 0}, {1, 2, 3, 4}}},
		{"batched by shared matrix", []*Tensor{host(t, []int{2, 1, 2}, 1, 2, 3, 4), host(t, []int{2, 1}, 1, -1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Matmul(in[0], in[1])) },
			-2, [][]float64{{1, -1, 1, -1}, {4, 6}}},
	}
}

func TestMoreOpGradients(t *testing.T) {
	e := newEngine(t)
	for _, c := range moreGradCases(t) {
		t.Run(c.name, func(t *testing.T) {
			checkReference(t, e, c, 2e-4)
			if c.name != "max dim 1" && c.name != "max dim 0" && c.name != "min" { // kinks, as for relu
				f := func(xs []*Tensor) (*Tensor, error) { return c.f(e, xs) }
				require.NoError(t, Gradcheck(e, f, c.inputs, 1e-2, 2e-3, 2e-2))
			}
		})
	}
}

func TestArgmaxAndDropout(t *testing.T) {
	e := newEngine(t)
	idx, err := e.ArgmaxDim(host(t, []int{2, 3}, 1, 9, 3, 7, 5, 6), 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0}, values(t, idx))
	idx, err = e.ArgmaxDim(host(t, []int{2, 3}, 1, 9, 3, 7, 5, 6), 0)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0, 1}, values(t, idx))

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

// TestLinearPathsAgree checks Linear on a product large enough to take the
// OpenBLAS path (in builds that have it) against the ggml path and against
// sums in float64, forward and both gradients, 2-d and batched.
func TestLinearPathsAgree(t *testing.T) {
	e := newEngine(t)
	rnd := func(n int, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i*7+seed))) * 0.5
		}
		return v
	}
	for _, xs := range [][]int{{64, 96}, {3, 20, 96}} {
		rows := 1
		for _, d := range xs[:len(xs)-1] {
			rows *= d
		}
		xv, wv, cv := rnd(rows*96, 1), rnd(128*96, 2), rnd(rows*128, 3)
		run := func(blas bool) (y, gx, gw []float32) {
			e.useBLAS = blas && ggmlcgo.BLASAvailable()
			x, w := host(t, xs, xv...), host(t, []int{128, 96}, wv...)
			require.NoError(t, x.SetRequiresGrad(true))
			require.NoError(t, w.SetRequiresGrad(true))
			out := append(append([]int(nil), xs[:len(xs)-1]...), 128)
			var loss, yt *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				if yt, err = e.Linear(x, w); err == nil {
					loss, err = sumOf(e)(e.Mul(yt, host(t, out, cv...)))
				}
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			return values(t, yt), values(t, x.Grad()), values(t, w.Grad())
		}
		y1, gx1, gw1 := run(true)
		y2, gx2, gw2 := run(false)
		for i := 0; i < rows; i += 7 {
			for j := 0; j < 128; j += 13 {
				want := 0.0
				for k := 0; k < 96; k++ {
					want += float64(xv[i*96+k]) * float64(wv[j*96+k])
				}
				assert.InDelta(t, want, y1[i*128+j], 1e-4)
			}
		}
		for name, pair := range map[string][2][]float32{"y": {y1, y2}, "dx": {gx1, gx2}, "dw": {gw1, gw2}} {
			for i := range pair[0] {
				require.InDelta(t, pair[1][i], pair[0][i], 1e-3, "%s %v element %d", name, xs, i)
			}
		}
		// dw = Σ_rows c_row ⊗ x_row, checked in float64 at a few places.
		for _, jk := range [][2]int{{0, 0}, {127, 95}, {50, 3}} {
			want := 0.0
			for i := 0; i < rows; i++ {
				want += float64(cv[i*128+jk[0]]) * float64(xv[i*96+jk[1]])
			}
			assert.InDelta(t, want, gw1[jk[0]*96+jk[1]], 1e-3)
		}
	}
	e.useBLAS = ggmlcgo.BLASAvailable()
}
