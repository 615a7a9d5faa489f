package core

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statsCase is a case of testdata/torch_stats.json (scripts/reference/
// stats.py): an op with its arguments, the input, PyTorch's output (and
// indices), and the input's gradient of sum(output * w).
type statsCase struct {
	Op   string
	Args struct {
		Dim, K                       int
		Correction                   float64
		P                            torchNum
		Keepdim, Descending, Largest bool
		Index                        []int
		IndexShape                   []int `json:"index_shape"`
		Src                          []torchNum
		SrcShape                     []int `json:"src_shape"`
		Mask                         []float32
		MaskShape                    []int `json:"mask_shape"`
	}
	X, Out, W, Grad torchTensor
	GradSrc         *torchTensor `json:"grad_src"`
	Indices         []int
}

// run computes the case's op (src is the scatters' source); indices
// (0-based) for sort and topk.
func (c statsCase) run(e *Engine, x, src *Tensor) (y, idx *Tensor, err error) {
	a := c.Args
	switch c.Op {
	case "var":
		y, err = e.Var(x, a.Dim, a.Correction, a.Keepdim)
	case "std":
		y, err = e.Std(x, a.Dim, a.Correction, a.Keepdim)
	case "logsumexp":
		y, err = e.LogSumExp(x, a.Dim, a.Keepdim)
	case "norm":
		y, err = e.Norm(x, float64(a.P), a.Dim, a.Keepdim)
	case "prod":
		y, err = e.Prod(x, a.Dim, a.Keepdim)
	case "cumsum":
		y, err = e.Cumsum(x, a.Dim)
	case "sort":
		y, idx, err = e.Sort(x, a.Dim, a.Descending)
	case "topk":
		y, idx, err = e.TopK(x, a.K, a.Dim, a.Largest)
	case "gather":
		y, err = e.Gather(x, a.Dim, a.Index, a.IndexShape)
	case "index_add":
		y, err = e.IndexAdd(x, a.Dim, a.Index, src)
	case "scatter_add":
		shape := a.IndexShape // the index may be smaller than src
		if shape == nil {
			shape = src.Shape()
		}
		y, err = e.ScatterAddIndex(x, a.Dim, a.Index, shape, src)
	case "masked_select":
		var mask *Tensor
		if mask, err = FromFloat32(a.Mask, a.MaskShape...); err == nil {
			y, err = e.MaskedSelect(x, mask)
		}
	default:
		err = fmt.Errorf("unknown op %s", c.Op)
	}
	return y, idx, err
}

// sameNumbers compares float32 results with float64 references: NaN and
// infinities exactly, numbers to a relative 1e-4.
func sameNumbers(t *testing.T, want []torchNum, got []float32, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, w := range want {
		w, g := float64(w), float64(got[i])
		switch {
		case math.IsNaN(w):
			assert.True(t, math.IsNaN(g), "%s[%d]: want NaN, got %g", what, i, g)
		case math.IsInf(w, 0):
			assert.Equal(t, w, g, "%s[%d]", what, i)
		default:
			assert.InDelta(t, w, g, 1e-4*(1+math.Abs(w)), "%s[%d]", what, i)
		}
	}
}

// TestStatsAsTorch runs the cases of testdata/torch_stats.json and
// torch_scatter_add.json (scatter_add with an index smaller than src: only
// src's elements within index's shape are added, the others get a zero
// gradient), both written by scripts/reference/stats.py.
func TestStatsAsTorch(t *testing.T) {
	var cases []statsCase
	for _, file := range []string{"testdata/torch_stats.json", "testdata/torch_scatter_add.json"} {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		var some []statsCase
		require.NoError(t, json.Unmarshal(raw, &some))
		require.NotEmpty(t, some, file)
		cases = append(cases, some...)
	}
	e := newEngine(t)
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d %s", i+1, c.Op), func(t *testing.T) {
			x := c.X.host(t)
			require.NoError(t, x.SetRequiresGrad(true))
			var src *Tensor
			if c.Args.Src != nil {
				src = torchTensor{Shape: c.Args.SrcShape, Values: c.Args.Src}.host(t)
				require.NoError(t, src.SetRequiresGrad(true))
			}
			var y, idx, loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				var err error
				if y, idx, err = c.run(e, x, src); err != nil {
					return err
				}
				loss, err = sumOf(e)(e.Mul(y, c.W.host(t)))
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			wantShape := c.Out.Shape
			if len(wantShape) == 0 {
				wantShape = []int{1}
			}
			assert.Equal(t, wantShape, y.Shape())
			sameNumbers(t, c.Out.Values, values(t, y), "output")
			require.NotNil(t, x.Grad(), "no gradient")
			sameNumbers(t, c.Grad.Values, values(t, x.Grad()), "gradient")
			if c.GradSrc != nil {
				require.NotNil(t, src.Grad(), "no gradient of src")
				sameNumbers(t, c.GradSrc.Values, values(t, src.Grad()), "gradient of src")
			}
			if c.Indices != nil {
				got := values(t, idx)
				for i, want := range c.Indices {
					assert.Equal(t, float32(want), got[i], "index %d", i)
				}
			}
		})
	}
}

func TestStatsErrors(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	for name, bad := range map[string]func() error{
		"norm p 0":         func() error { _, err := e.Norm(x, 0, 1, false); return err },
		"norm p NaN":       func() error { _, err := e.Norm(x, math.NaN(), 1, false); return err },
		"var dim":          func() error { _, err := e.Var(x, 2, 1, false); return err },
		"topk k too large": func() error { _, _, err := e.TopK(x, 4, 1, true); return err },
		"topk k negative":  func() error { _, _, err := e.TopK(x, -1, 1, true); return err },
		"gather rank":      func() error { _, err := e.Gather(x, 0, []int{0}, []int{1}); return err },
		"gather range":     func() error { _, err := e.Gather(x, 1, []int{3}, []int{1, 1}); return err },
		"gather too big":   func() error { _, err := e.Gather(x, 1, make([]int, 9), []int{3, 3}); return err },
		"index_add shape":  func() error { _, err := e.IndexAdd(x, 1, []int{0}, x); return err },
		"index_add range":  func() error { _, err := e.IndexAdd(x, 0, []int{2}, host(t, []int{1, 3}, 1, 2, 3)); return err },
		"scatter_add rank": func() error { _, err := e.ScatterAdd(x, 0, []int{0}, host(t, []int{1}, 1)); return err },
		"masked shape":     func() error { _, err := e.MaskedSelect(x, host(t, []int{2}, 1, 1)); return err },
	} {
		assert.Error(t, bad(), name)
	}
}
