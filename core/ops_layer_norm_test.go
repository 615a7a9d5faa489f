package core

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fused LayerNorm (layer_norm.c; a GPU's kernels are checked against
// it by tests/gpu/library.lua) against the composed one, on rows longer
// than the reference cases' 3: values and the gradients of x, w and b.

// layerNormRun returns y and the gradients of x, w and b of sum(y·r) for
// x [rows, n] with or without w and b, fused or composed.
func layerNormRun(t *testing.T, rows, n int, affine, fused bool) [][]float32 {
	rng := rand.New(rand.NewSource(int64(rows*97 + n)))
	randn := func(k int, scale, shift float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64()*scale + shift)
		}
		return v
	}
	forceComposedLayerNorm = !fused
	defer func() { forceComposedLayerNorm = false }()
	e := newEngine(t)
	x := host(t, []int{rows, n}, randn(rows*n, 3, 5)...) // far from zero mean
	ins := []*Tensor{x}
	var w, b *Tensor
	if affine {
		w, b = host(t, []int{n}, randn(n, 1, 1)...), host(t, []int{n}, randn(n, 1, 0)...)
		ins = append(ins, w, b)
	}
	for _, p := range ins {
		require.NoError(t, p.SetRequiresGrad(true))
	}
	r := host(t, []int{rows, n}, randn(rows*n, 1, 0)...)
	var y *Tensor
	require.NoError(t, e.WithGradTape(func() error {
		y = e.must(e.LayerNorm(x, w, b, 1e-5))
		assert.Equal(t, fused, y.base != nil, "the fused op ran (its output a view of the run)")
		_, err := e.Backward(e.must(e.Sum(e.must(e.Mul(y, r)))))
		return err
	}))
	out := [][]float32{values(t, y)}
	for _, p := range ins {
		out = append(out, values(t, p.grad))
	}
	return out
}

func TestLayerNormFusedAsComposed(t *testing.T) {
	for _, c := range []struct {
		rows, n int
		affine  bool
	}{{33, 70, true}, {5, 768, true}, {17, 1, true}, {9, 129, false}} {
		fused, composed := layerNormRun(t, c.rows, c.n, c.affine, true), layerNormRun(t, c.rows, c.n, c.affine, false)
		require.Len(t, fused, len(composed))
		for i := range fused {
			require.Len(t, fused[i], len(composed[i]))
			for j := range fused[i] {
				// dw and db sum over every row: scale the bound by their size.
				tol := 2e-5 * (1 + math.Abs(float64(composed[i][j])))
				require.InDelta(t, composed[i][j], fused[i][j], tol, "rows %d n %d: result %d element %d", c.rows, c.n, i, j)
			}
		}
	}
}

// A write into the fused op's output through a detached view, between the
// forward and the backward, changes no gradient: the backward reads x and
// its own copy of each row's mean and 1/sd, as PyTorch's saves them (so
// the tape keeps no output). NaN in a row gives NaN in that row only.
func TestLayerNormFusedIgnoresAChangedOutputAndKeepsNaN(t *testing.T) {
	e := newEngine(t)
	w := host(t, []int{4}, 0.5, -1, 2, 0.25) // so that the gradient reads the statistics
	grad := func(overwrite bool) []float32 {
		x := host(t, []int{2, 4}, 1, 2, 3, float32(math.NaN()), 1, 2, 3, 5)
		require.NoError(t, x.SetRequiresGrad(true))
		var gx *Tensor
		require.NoError(t, e.WithGradTape(func() error {
			y := e.must(e.LayerNorm(x, w, nil, 1e-5))
			require.NotNil(t, y.base, "the fused op ran")
			v := values(t, y)
			for i, f := range v {
				assert.Equal(t, i < 4, math.IsNaN(float64(f)), "element %d of %v", i, v)
			}
			loss := e.must(e.Sum(y))
			if overwrite {
				zeros := host(t, y.Shape(), make([]float32, y.Numel())...)
				require.NoError(t, e.Assign(y.Detach(), e.must(e.Add(zeros, zeros))))
			}
			grads, err := e.Backward(loss)
			gx = grads[x]
			return err
		}))
		return values(t, gx)
	}
	want := grad(false)
	for i, g := range want {
		assert.Equal(t, i < 4, math.IsNaN(float64(g)), "gradient element %d of %v", i, want)
	}
	assert.Equal(t, fmt.Sprint(want), fmt.Sprint(grad(true)))
}

// The fused gradient against a numerical one, with and without affine.
func TestLayerNormFusedGradcheck(t *testing.T) {
	e := newEngine(t)
	rng := rand.New(rand.NewSource(3))
	randn := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, w, b := host(t, []int{3, 7}, randn(21)...), host(t, []int{7}, randn(7)...), host(t, []int{7}, randn(7)...)
	r := host(t, []int{3, 7}, randn(21)...)
	for _, ins := range [][]*Tensor{{x, w, b}, {x}} {
		f := func(in []*Tensor) (*Tensor, error) {
			var wp, bp *Tensor
			if len(in) == 3 {
				wp, bp = in[1], in[2]
			}
			y, err := e.LayerNorm(in[0], wp, bp, 1e-5)
			if err != nil {
				return nil, err
			}
			return e.Sum(e.must(e.Mul(y, r)))
		}
		require.NoError(t, Gradcheck(e, f, ins, 1e-2, 2e-3, 2e-2))
	}
}
