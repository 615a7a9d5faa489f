package core

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reduceGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	return []gradCase{
		{"reshape and sum dim", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				r, err := e.Reshape(in[0], 3, 2)
				if err != nil {
					return nil, err
				}
				s, err := e.SumDim(r, 0, false) // [9, 12]
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(s, host(t, []int{2}, 1, 2)))
			},
			9 + 24, [][]float64{{1, 2, 1, 2, 1, 2}}},
		{"mean dim 1", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				s, err := e.MeanDim(in[0], 1, true) // [[2],[5]]
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(s, host(t, []int{2, 1}, 1, 3)))
			},
			17, [][]float64{{1. / 3, 1. / 3, 1. / 3, 1, 1, 1}}},
		{"max dim 1", []*Tensor{m23(1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				m, _, err := e.MaxDim(in[0], 1, false)
				return sumOf(e)(e.Mul(e.must(m, err), host(t, []int{2}, 1, 2)))
			},
			15, [][]float64{{0, 0, 1, 0, 0, 2}}},
		{"max dim 0", []*Tensor{m23(1, 5, 3, 4, 2, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				m, _, err := e.MaxDim(in[0], 0, false)
				return sumOf(e)(m, err)
			},
			4 + 5 + 6, [][]float64{{0, 1, 0, 1, 0, 1}}},
		{"min", []*Tensor{x(0.5, -1.5, 2)},
			func(e *Engine, in []*Tensor) (*Tensor, error) { return e.Min(in[0]) },
			-1.5, [][]float64{{0, 1, 0}}},
	}
}

func TestReduceGradients(t *testing.T) {
	runGradCases(t, reduceGradCases(t), gradChecks{
		loose: []string{"max dim 1", "max dim 0", "min"},
		kinks: []string{"max dim 1", "max dim 0", "min"}, // as for relu
	})
}

func TestArgmaxDim(t *testing.T) {
	e := newEngine(t)
	idx, err := e.ArgmaxDim(host(t, []int{2, 3}, 1, 9, 3, 7, 5, 6), 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0}, values(t, idx))
	idx, err = e.ArgmaxDim(host(t, []int{2, 3}, 1, 9, 3, 7, 5, 6), 0)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 0, 1}, values(t, idx))
}

func refFloats(v []torchNum) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// assertSameFloats compares element by element: NaN matches NaN, infinities
// match exactly, the rest within tol.
func assertSameFloats(t *testing.T, want []torchNum, got []float32, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i, w := range want {
		g := float64(got[i])
		switch wf := float64(w); {
		case math.IsNaN(wf):
			assert.True(t, math.IsNaN(g), "%s: element %d is %g, want NaN", msg, i+1, g)
		case math.IsInf(wf, 0):
			assert.Equal(t, wf, g, "%s: element %d", msg, i+1)
		default:
			assert.InDelta(t, wf, g, tol*math.Max(1, math.Abs(wf)), "%s: element %d", msg, i+1)
		}
	}
}

// TestReductionsMatchPyTorch checks max, min and argmax (values, indices and
// gradients; ties, NaN and infinities; every dim) against PyTorch's numbers
// in testdata/torch_reductions.json (scripts/reference/reductions.py).
func TestReductionsMatchPyTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/torch_reductions.json")
	require.NoError(t, err)
	var ref struct {
		Cases []struct {
			Name     string
			Op       string
			Dim      *int
			Keepdim  bool
			Shape    []int
			X        []torchNum
			Cot      []torchNum
			OutShape []int `json:"out_shape"`
			Values   []torchNum
			Indices  []torchNum
			Grad     []torchNum
		}
	}
	require.NoError(t, json.Unmarshal(raw, &ref))
	require.NotEmpty(t, ref.Cases)
	e := newEngine(t)
	for _, c := range ref.Cases {
		t.Run(c.Name, func(t *testing.T) {
			x := host(t, c.Shape, refFloats(c.X)...)
			require.NoError(t, x.SetRequiresGrad(true))
			var vals, idx, loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				switch {
				case c.Op == "argmax":
					idx, err = e.ArgmaxDim(x, *c.Dim)
					return err
				case c.Dim == nil && c.Op == "max":
					vals, err = e.Max(x)
				case c.Dim == nil:
					vals, err = e.Min(x)
				case c.Op == "max":
					vals, idx, err = e.MaxDim(x, *c.Dim, c.Keepdim)
				default:
					vals, idx, err = e.MinDim(x, *c.Dim, c.Keepdim)
				}
				if err != nil {
					return err
				}
				weighted, err := e.Mul(vals, host(t, vals.Shape(), refFloats(c.Cot)...))
				if err == nil {
					loss, err = e.Sum(weighted)
				}
				return err
			}))
			if idx != nil {
				assert.Equal(t, c.OutShape, idx.Shape())
				assertSameFloats(t, c.Indices, values(t, idx), 0, "indices")
			}
			if vals == nil {
				return
			}
			assert.Equal(t, c.OutShape, vals.Shape())
			assertSameFloats(t, c.Values, values(t, vals), 0, "values")
			ZeroGrad([]*Tensor{x})
			_, err := e.Backward(loss)
			require.NoError(t, err)
			assertSameFloats(t, c.Grad, values(t, x.Grad()), 1e-6, "gradient")
		})
	}
}

// TestSumsPastCUDARepeatBackLimit: a sum whose source has more than 32768
// outer elements (ne2*ne3; (B, H, T, D) attention tensors reach it) was not
// supported on CUDA; such sums now merge neighbouring dims first. The
// merged path, taken here on the CPU, gives the same sums and gradients.
func TestSumsPastCUDARepeatBackLimit(t *testing.T) {
	e := newEngine(t)
	run := func(fold bool) [][]float32 {
		foldRepeatBackOnCPU = fold
		defer func() { foldRepeatBackOnCPU = false }()
		var out [][]float32
		for _, c := range []struct {
			shape []int
			dim   int
		}{
			{[]int{200, 200, 2, 3}, 0}, {[]int{200, 200, 2, 3}, 1}, {[]int{200, 200, 2, 3}, 2}, {[]int{200, 200, 2, 3}, 3},
			{[]int{50000, 1, 2}, 0}, {[]int{50000, 1, 2}, 2}, {[]int{40000, 1, 1, 2}, 0},
		} {
			size := 1
			for _, d := range c.shape {
				size *= d
			}
			v := make([]float32, size)
			for i := range v {
				v[i] = float32(i%13) - 6
			}
			x := host(t, c.shape, v...)
			require.NoError(t, x.SetRequiresGrad(true))
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				s, err := e.SumDim(x, c.dim, true)
				if err != nil {
					return err
				}
				b, err := e.Mul(x, s) // broadcasting back: sumTo in the gradient
				if err != nil {
					return err
				}
				// a bias of fewer dims: sumTo to a shape of lower rank
				last, err := e.Select(x, 0, 0)
				if err != nil {
					return err
				}
				if b, err = e.Add(b, last); err != nil {
					return err
				}
				loss, err = e.Sum(b)
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			out = append(out, values(t, loss), values(t, x.Grad()))
		}
		return out
	}
	want := run(false)
	folds := repeatBackFolds.Load()
	assert.Equal(t, want, run(true))
	assert.Greater(t, repeatBackFolds.Load(), folds, "the merged path ran")
}

// TestColumnSumsAsRepeatBack: the GPU's sum of leading dims (the
// column-sum kernel), forced on the CPU, gives the reduction cases' values
// and gradients and PyTorch's.
func TestColumnSumsAsRepeatBack(t *testing.T) {
	// The matmul cases hold bias-like broadcast gradients.
	runForced(t, &colSumsOnCPU, TestReduceGradients, TestReductionsMatchPyTorch, TestMatmulGradients,
		TestLossGradients, TestNormMatchesTorch)
}
