package core

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gglua/gglua/core/residency"
	"github.com/gglua/gglua/ggmlcgo"
)

func matmulGradCases(t *testing.T) []gradCase {
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	return []gradCase{
		{"matmul", []*Tensor{m23(1, 2, 3, 4, 5, 6), host(t, []int{3, 2}, 1, 0, 0, 1, 1, 1)},
			// a·b = [[4,5],[10,11]]; d/da = 1·bᵀ rows (1,1,2); d/db = aᵀ·1 = column sums of a.
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Matmul(in[0], in[1])) },
			30, [][]float64{{1, 1, 2, 1, 1, 2}, {5, 5, 7, 7, 9, 9}}},
		{"batched matmul", []*Tensor{host(t, []int{2, 1, 2}, 1, 2, 3, 4), host(t, []int{2, 2, 1}, 1, 1, 2, 0)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Matmul(in[0], in[1])) },
			9, [][]float64{{1, 1, 2, 0}, {1, 2, 3, 4}}},
		{"batched by shared matrix", []*Tensor{host(t, []int{2, 1, 2}, 1, 2, 3, 4), host(t, []int{2, 1}, 1, -1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Matmul(in[0], in[1])) },
			-2, [][]float64{{1, -1, 1, -1}, {4, 6}}},
		// Dims that are multiples of 4: a GPU (and forceOutProd) takes both
		// gradients as out_prod. Σ x·wᵀ = Σ_k colsum(x)_k · colsum(w)_k.
		{"linear, aligned dims", []*Tensor{host(t, []int{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8),
			host(t, []int{4, 4}, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return sumOf(e)(e.Linear(in[0], in[1])) },
			60, [][]float64{{2, 2, 2, 1, 2, 2, 2, 1}, {6, 8, 10, 12, 6, 8, 10, 12, 6, 8, 10, 12, 6, 8, 10, 12}}},
	}
}

func TestMatmulGradients(t *testing.T) {
	runGradCases(t, matmulGradCases(t), gradChecks{
		loose: []string{"batched matmul", "batched by shared matrix"},
	})
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

// TestMatmulAsTorch: PyTorch's matmul rules (1-d operands, broadcast batch
// dims up to 4-d) and bmm give PyTorch's products and gradients
// (testdata/torch_matmul.json, scripts/reference/matmul.py).
func TestMatmulAsTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_matmul.json")
	require.NoError(t, err)
	var cases []struct {
		Name, Op     string
		A, B, Out, W []float64
		AShapeJ      []int     `json:"a_shape"`
		BShapeJ      []int     `json:"b_shape"`
		OutShapeJ    []int     `json:"out_shape"`
		GradAJ       []float64 `json:"grad_a"`
		GradBJ       []float64 `json:"grad_b"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	near := func(t *testing.T, want []float64, got []float32, what string) {
		require.Len(t, got, len(want), what)
		for i := range want {
			assert.InDelta(t, want[i], got[i], 1e-4*(1+math.Abs(want[i])), "%s[%d]", what, i)
		}
	}
	e := newEngine(t)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			a, err := FromFloat32(f32(c.A), c.AShapeJ...)
			require.NoError(t, err)
			b, err := FromFloat32(f32(c.B), c.BShapeJ...)
			require.NoError(t, err)
			require.NoError(t, a.SetRequiresGrad(true))
			require.NoError(t, b.SetRequiresGrad(true))
			w, err := FromFloat32(f32(c.W), c.OutShapeJ...)
			require.NoError(t, err)
			var y, loss *Tensor
			err = e.WithGradTape(func() error {
				if c.Op == "bmm" {
					y, err = e.Bmm(a, b)
				} else {
					y, err = e.Matmul(a, b)
				}
				if err != nil {
					return err
				}
				loss, err = sumOf(e)(e.Mul(y, w))
				return err
			})
			require.NoError(t, err)
			_, err = e.Backward(loss)
			require.NoError(t, err)
			assert.Equal(t, c.OutShapeJ, y.Shape())
			near(t, c.Out, values(t, y), "out")
			near(t, c.GradAJ, values(t, a.Grad()), "grad a")
			near(t, c.GradBJ, values(t, b.Grad()), "grad b")
		})
	}
	for name, shapes := range map[string][2][]int{
		"inner sizes differ":       {{2, 3}, {4, 2}},
		"batches do not broadcast": {{2, 2, 3}, {3, 3, 2}},
		"vector sizes differ":      {{3}, {4}},
	} {
		a, _ := Zeros(shapes[0]...)
		b, _ := Zeros(shapes[1]...)
		_, err := e.Matmul(a, b)
		assert.ErrorIs(t, err, ErrShape, name)
	}
	a, _ := Zeros(2, 3)
	b, _ := Zeros(3, 2)
	_, err = e.Bmm(a, b)
	assert.ErrorIs(t, err, ErrShape, "bmm needs 3-d operands")
}

// TestOutProdGradientsAsTorch runs the gradient cases and PyTorch's matmul
// cases through the GPU's out_prod gradients (forced on the CPU).
func TestOutProdGradientsAsTorch(t *testing.T) {
	runForced(t, &forceOutProd, TestMatmulGradients, TestMatmulAsTorch, TestLinearPathsAgree)
}

// TestBatchedLinearIsNoView: a 3-d input times a 2-d weight is computed as
// one 2-d product, but its result, as PyTorch's, is a tensor of its own (not
// a view of an intermediate), so it can become a parameter and move.
// TestGGMLTransposes: the devices' transposes (ggml's copy, 4-d operands
// as 3-d), forced on the CPU, give the products' values and gradients, and
// the attention products' that read strided rows too.
func TestGGMLTransposes(t *testing.T) {
	runForced(t, &forceGGMLTranspose, TestMatmulGradients, TestMatmulAsTorch, TestLinearPathsAgree, TestAttentionReadsStridedRows)
}

func TestBatchedLinearIsNoView(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3, 4}, make([]float32, 24)...)
	w := host(t, []int{5, 4}, make([]float32, 20)...)
	y, err := e.Linear(x, w)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 5}, y.Shape())
	require.Nil(t, y.base)
	require.NoError(t, y.MoveToDevice(e, residency.Persistent))

	// Flattening a pending input and unflattening the product copy nothing:
	// the graph reshapes in place. (Lazily: GGLUA_EAGER computes x2 alone.)
	e.eager = false
	t.Setenv("GGLUA_OPPROFILE", "1")
	e.profile = newOpProfile()
	x2, err := e.Mul(x, x)
	require.NoError(t, err)
	y, err = e.Linear(x2, w)
	require.NoError(t, err)
	require.NoError(t, e.Realize())
	var ops []string
	for _, c := range e.profile.byKey {
		ops = append(ops, c.op)
	}
	require.Contains(t, ops, "RESHAPE")
	require.NotContains(t, ops, "CONT")
}
