package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func movementGradCases(t *testing.T) []gradCase {
	x := func(v ...float32) *Tensor { return host(t, []int{len(v)}, v...) }
	m23 := func(v ...float32) *Tensor { return host(t, []int{2, 3}, v...) }
	return []gradCase{
		{"transpose then weight", []*Tensor{m23(1, 2, 3, 4, 5, 6), host(t, []int{3, 2}, 1, 2, 3, 4, 5, 6)},
			func(e *Engine, in []*Tensor) (*Tensor, error) {
				tr, err := e.Transpose(in[0], 0, 1)
				if err != nil {
					return nil, err
				}
				return sumOf(e)(e.Mul(tr, in[1]))
			},
			1*1 + 4*2 + 2*3 + 5*4 + 3*5 + 6*6, [][]float64{{1, 3, 5, 2, 4, 6}, {1, 4, 2, 5, 3, 6}}},
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
	}
}

func TestMovementGradients(t *testing.T) {
	runGradCases(t, movementGradCases(t), gradChecks{
		loose: []string{"narrow", "cat", "index_select"},
	})
}

// TestCatRowLayoutMatchesConcat: the layout cat takes where ggml-cuda's
// concat would launch past the grid limit (concatRows) gives concat's
// values, checked on the CPU for every dim of 1-d to 4-d tensors, sizes
// with and without divisors (7 is prime).
func TestCatRowLayoutMatchesConcat(t *testing.T) {
	e := newEngine(t)
	for _, shape := range [][]int{{5}, {3, 4}, {2, 7, 3}, {2, 3, 5, 7}} {
		for d := range shape {
			a := randHost(t, shape...)
			bs := append([]int(nil), shape...)
			bs[d] = 2
			b := randHost(t, bs...)
			want, err := e.Cat([]*Tensor{a, b}, d)
			require.NoError(t, err)
			wv, err := want.Float32s()
			require.NoError(t, err)
			forceConcatRows = true
			got, err := e.Cat([]*Tensor{a, b}, d)
			forceConcatRows = false
			require.NoError(t, err)
			gv, err := got.Float32s()
			require.NoError(t, err)
			require.Equal(t, want.Shape(), got.Shape())
			require.Equal(t, wv, gv, "shape %v dim %d", shape, d)
		}
	}
}

// randHost is a host tensor of shape with distinct values.
func randHost(t *testing.T, shape ...int) *Tensor {
	n := 1
	for _, s := range shape {
		n *= s
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)*0.37 - float32(n)/3
	}
	return host(t, shape, v...)
}

// TestPickRowsBackAsGetRowsBack: the GPU's gradient of picking rows by
// indices that are all different (pickRowsBack: zeros with the rows
// written in by set_rows), forced on the CPU, gives what get_rows_back gives: the
// picking ops' gradient cases and their PyTorch references (cross-entropy
// and nll labels, index_select, gather, sort, the scatters).
func TestPickRowsBackAsGetRowsBack(t *testing.T) {
	runForced(t, &forcePickRowsBack, TestMovementGradients, TestLossGradients, TestLossesMatchTorch,
		TestNewLossesMatchTorch, TestStatsAsTorch, TestShapeGradients)
}

// TestOneHotRowsBackAsGetRowsBack: the GPU's gradient of picking rows by
// repeated indices (an embedding's: one GEMM with a one-hot made on the
// device), forced on the CPU, gives what get_rows_back gives.
func TestOneHotRowsBackAsGetRowsBack(t *testing.T) {
	runForced(t, &forceOneHotRowsBack, TestMovementGradients, TestLossGradients, TestLossesMatchTorch,
		TestStatsAsTorch, TestShapeGradients)
}

// TestOneHotRowsBackLayouts: the one-hot GEMM pads its rows to a multiple
// of 4 (cuBLAS's aligned leading dims) and keeps the first ones; with
// rows aligned or not, and odd columns, it gives get_rows_back's gradient.
func TestOneHotRowsBackLayouts(t *testing.T) {
	e := newEngine(t)
	idx := []int{3, 0, 3, 1, 2, 3, 0}
	for _, shape := range [][]int{{8, 4}, {5, 3}, {4, 6}} {
		rows, cols := shape[0], shape[1]
		grad := func(force bool) []float32 {
			forceOneHotRowsBack = force
			defer func() { forceOneHotRowsBack = false }()
			xv := make([]float32, rows*cols)
			for i := range xv {
				xv[i] = float32(i%7) - 3
			}
			x := host(t, shape, xv...)
			require.NoError(t, x.SetRequiresGrad(true))
			wv := make([]float32, len(idx)*cols)
			for i := range wv {
				wv[i] = float32(i%5) + 0.5
			}
			var loss *Tensor
			require.NoError(t, e.WithGradTape(func() error {
				y, err := e.IndexSelect(x, 0, idx)
				if err == nil {
					loss, err = sumOf(e)(e.Mul(y, host(t, []int{len(idx), cols}, wv...)))
				}
				return err
			}))
			_, err := e.Backward(loss)
			require.NoError(t, err)
			return values(t, x.Grad())
		}
		require.Equal(t, grad(false), grad(true), "rows %d, cols %d (aligned: %v)", rows, cols, cuBLASAligned(rows, cols))
	}
}

// TestViewStridesFollowPyTorch: which strided tensors view as which shapes,
// and with what strides, as PyTorch 1.13's Tensor.view answers (the strides
// of size-1 dims aside, which gglua normalises).
func TestViewStridesFollowPyTorch(t *testing.T) {
	e := newEngine(t)
	zeros := func(shape ...int) *Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return host(t, shape, make([]float32, n)...)
	}
	must := func(x *Tensor, err error) *Tensor {
		require.NoError(t, err)
		return x
	}
	narrowed := must(e.Narrow(zeros(2, 5, 12), 2, 4, 4))
	transposed := must(e.Transpose(zeros(3, 4), 0, 1))
	permuted := must(e.Transpose(zeros(2, 3, 4), 1, 2))
	sliced := must(e.Narrow(zeros(4, 1, 6), 2, 1, 4))
	for _, c := range []struct {
		name  string
		x     *Tensor
		shape []int
		want  []int64 // nil: no view
	}{
		{"narrow -> heads", narrowed, []int{2, 5, 2, 2}, []int64{60, 12, 2, 1}},
		{"narrow -> rows", narrowed, []int{10, 4}, []int64{12, 1}},
		{"narrow -> across runs", narrowed, []int{2, 20}, nil},
		{"transpose -> flat", transposed, []int{12}, nil},
		{"transpose -> split", transposed, []int{2, 2, 3}, []int64{2, 1, 4}},
		{"transpose -> trailing 1", transposed, []int{4, 3, 1}, []int64{1, 4, 1}},
		{"permute -> merged", permuted, []int{2, 12}, nil},
		{"permute -> leading 1", permuted, []int{1, 2, 4, 3}, []int64{24, 12, 1, 4}},
		{"permute -> split", permuted, []int{2, 2, 2, 3}, []int64{12, 2, 1, 4}},
		{"slice -> rows", sliced, []int{4, 4}, []int64{6, 1}},
		{"slice -> split rows", sliced, []int{2, 2, 4}, []int64{12, 6, 1}},
		{"slice -> flat", sliced, []int{16}, nil},
	} {
		got, ok := viewStrides(c.x, c.shape)
		if c.want == nil {
			assert.False(t, ok, c.name)
			_, err := e.View(c.x, c.shape...)
			assert.ErrorContains(t, err, "use reshape", c.name)
			continue
		}
		require.True(t, ok, c.name)
		for i := range got {
			if c.shape[i] == 1 {
				got[i] = c.want[i]
			}
		}
		assert.Equal(t, c.want, got, c.name)
		v, err := e.View(c.x, c.shape...)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.x.storage(), v.storage(), "%s: a view shares x's storage", c.name)
	}
}

// distinctRows decides between pickRowsBack and the summing forms: a wrong
// true would drop a repeated index's gradients.
func TestDistinctRows(t *testing.T) {
	for _, tc := range []struct {
		idx  []int
		rows int
		want bool
	}{
		{nil, 4, true},
		{[]int{3}, 4, true},
		{[]int{0, 5, 9, 130}, 131, true},      // increasing
		{[]int{130, 0, 64, 1, 63}, 131, true}, // across words of the set
		{[]int{2, 2}, 4, false},
		{[]int{1, 5, 3, 5}, 6, false},
		{[]int{0, 64, 128, 64}, 129, false}, // equal bits of different words
		{[]int{0, 1, 2, 2, 3}, 4, false},    // increasing, then a repeat
	} {
		assert.Equal(t, tc.want, distinctRows(tc.idx, tc.rows), "%v", tc.idx)
	}
}

// TestMoreThanFourDimsIsRefused: a 5-d shape names ggml's limit of 4,
// rather than saying the sizes do not fit.
func TestMoreThanFourDimsIsRefused(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3, 4, 5}, make([]float32, 120)...)
	for _, f := range []func() (*Tensor, error){
		func() (*Tensor, error) { return e.Reshape(x, 2, 3, 2, 2, 5) },
		func() (*Tensor, error) { return e.View(x, 1, 2, 3, 4, 5) },
	} {
		_, err := f()
		assert.ErrorIs(t, err, ErrShape)
		assert.ErrorContains(t, err, "at most 4 (ggml's limit)")
	}
}
