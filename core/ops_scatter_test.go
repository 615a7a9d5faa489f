package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScatterAddSmallIndexGradients: loss = sum(scatter_add(x, 2, index,
// src) * w) with a [2, 2] index into a [3, 3] src: x's gradient is w, and
// src's is w at the position each src element went to, 0 for the elements
// outside index's shape (worked out by hand below).
func TestScatterAddSmallIndexGradients(t *testing.T) {
	w := host(t, []int{2, 3}, 0.5, -1, 2, 3, 0.25, -2)
	idx := []int{2, 0, 1, 1} // [[3, 1], [2, 2]] in Lua's 1-based terms
	cases := []gradCase{{
		name: "dim 2, src larger in both dims",
		inputs: []*Tensor{
			host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6),
			host(t, []int{3, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9),
		},
		f: func(e *Engine, x []*Tensor) (*Tensor, error) {
			y, err := e.ScatterAddIndex(x[0], 1, idx, []int{2, 2}, x[1])
			if err != nil {
				return nil, err
			}
			return sumOf(e)(e.Mul(y, w))
		},
		// y = [[1+2, 2, 3+1], [4, 5+4+5, 6]]
		loss: 3*0.5 - 2 + 4*2 + 4*3 + 14*0.25 - 6*2,
		want: [][]float64{
			{0.5, -1, 2, 3, 0.25, -2},
			{2, 0.5, 0, 0.25, 0.25, 0, 0, 0, 0},
		},
	}}
	runGradCases(t, cases, gradChecks{})
}

// TestScatterAddIndexErrors: PyTorch's shape rule is enforced with errors
// naming scatter_add, never a partial result.
func TestScatterAddIndexErrors(t *testing.T) {
	e := newEngine(t)
	x := host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	src := host(t, []int{2, 2}, 1, 2, 3, 4)
	big := host(t, []int{3, 3}, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	for _, c := range []struct {
		name     string
		dim      int
		idx      []int
		idxShape []int
		src      *Tensor
		is       error
		want     string
	}{
		{"index larger than src", 1, make([]int, 6), []int{2, 3}, src, ErrShape, "larger than src of shape 2x2 in dim 2"},
		{"index larger than x outside dim", 1, make([]int, 3), []int{3, 1}, big, ErrShape, "larger than 2x3 outside dim 2"},
		{"index rank", 1, make([]int, 2), []int{2}, src, ErrShape, "one rank"},
		{"src rank", 1, make([]int, 2), []int{2, 1}, host(t, []int{2}, 1, 2), ErrShape, "one rank"},
		{"index count", 1, make([]int, 3), []int{2, 1}, src, ErrShape, "3 indices"},
		{"index value", 1, []int{0, 3}, []int{2, 1}, src, ErrArgument, "index 4 (element 2) is out of range"},
		{"dim", 2, make([]int, 2), []int{2, 1}, src, ErrShape, "dim 3 out of range"},
	} {
		_, err := e.ScatterAddIndex(x, c.dim, c.idx, c.idxShape, c.src)
		assert.ErrorIs(t, err, c.is, c.name)
		assert.ErrorContains(t, err, "scatter_add: ", c.name)
		assert.ErrorContains(t, err, c.want, c.name)
	}
}

// TestMaskedPutAndScatter: x[mask] = values (PyTorch's index_put with a
// boolean mask) and masked_scatter, worked by hand: the values go to the
// selected elements in row-major order, the gradient of sum(y·c) is c at
// x's other elements and c at each value's element. A row mask
// broadcasts over the rows; one value broadcasts to every selected element
// and its gradient sums theirs.
func TestMaskedPutAndScatter(t *testing.T) {
	x := func() *Tensor { return host(t, []int{2, 3}, 1, 2, 3, 4, 5, 6) }
	mask := host(t, []int{2, 3}, 1, 0, 1, 0, 1, 0)
	row := host(t, []int{3}, 0, 1, 1)
	c := host(t, []int{2, 3}, 1, -2, 3, 0.5, 4, -1)
	weighted := func(e *Engine, y *Tensor, err error) (*Tensor, error) { return sumOf(e)(e.Mul(e.must(y, err), c)) }
	runGradCases(t, []gradCase{
		{name: "put", inputs: []*Tensor{x(), host(t, []int{3}, 10, 20, 30)},
			f: func(e *Engine, in []*Tensor) (*Tensor, error) {
				y, err := e.MaskedPut(in[0], mask, in[1])
				return weighted(e, y, err)
			},
			loss: 10*1 - 2*2 + 20*3 + 0.5*4 + 30*4 - 1*6,
			want: [][]float64{{0, -2, 0, 0.5, 0, -1}, {1, 3, 4}}},
		{name: "put by a row mask", inputs: []*Tensor{x(), host(t, []int{4}, 10, 20, 30, 40)},
			f: func(e *Engine, in []*Tensor) (*Tensor, error) {
				y, err := e.MaskedPut(in[0], row, in[1])
				return weighted(e, y, err)
			},
			loss: 1 - 2*10 + 3*20 + 0.5*4 + 4*30 - 40,
			want: [][]float64{{1, 0, 0, 0.5, 0, 0}, {-2, 3, 4, -1}}},
		{name: "put one value", inputs: []*Tensor{x(), host(t, []int{1}, 7)},
			f: func(e *Engine, in []*Tensor) (*Tensor, error) {
				y, err := e.MaskedPut(in[0], mask, in[1])
				return weighted(e, y, err)
			},
			loss: 7 - 4 + 21 + 2 + 28 - 6,
			want: [][]float64{{0, -2, 0, 0.5, 0, -1}, {8}}},
		{name: "masked_scatter takes the first values", inputs: []*Tensor{x(), host(t, []int{2, 2}, 10, 20, 30, 40)},
			f: func(e *Engine, in []*Tensor) (*Tensor, error) {
				y, err := e.MaskedScatter(in[0], mask, in[1])
				return weighted(e, y, err)
			},
			loss: 10 - 4 + 60 + 2 + 120 - 6,
			want: [][]float64{{0, -2, 0, 0.5, 0, -1}, {1, 3, 4, 0}}},
	}, gradChecks{})

	e := newEngine(t)
	for _, c := range []struct {
		mask, values *Tensor
		want         string
	}{
		{mask, host(t, []int{2}, 1, 2), "selects 3 elements, the values (shape 2) are 2"},
		{mask, host(t, []int{4}, 1, 2, 3, 4), "selects 3 elements"},
		{mask, host(t, []int{3, 1}, 1, 2, 3), "must be 1-d"},
		{host(t, []int{2}, 1, 1), host(t, []int{3}, 1, 2, 3), "do not broadcast"},
		{host(t, []int{2, 3}, 0, 0, 0, 0, 0, 0), host(t, []int{3}, 1, 2, 3), "selects 0 elements, the values (shape 3) are 3"},
	} {
		_, err := e.MaskedPut(x(), c.mask, c.values)
		assert.Error(t, err, c.want)
		assert.ErrorContains(t, err, c.want)
	}
}
