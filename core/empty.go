package core

import (
	"slices"

	"github.com/gglua/gglua/ggmlcgo"
)

// Empty tensors: a shape with a size of 0, as PyTorch allows (a batch of
// no rows, a mask that selects nothing, a narrow of length 0). ggml holds
// no such tensor, so an empty one never reaches a graph: an op whose
// result has no elements makes an empty host tensor without computing
// anything (newOpReading), and the ops whose result has elements though an
// input has none compute it here from the shapes alone: sums (0), products
// (1), means (NaN, as 0/0), products of matrices over a dim of size 0 (0),
// joins that skip the empty pieces. Any other op that is given an empty
// input refuses it with errEmptyInput, never a wrong value.

// numel is the element count of shape.
func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// emptyTensor is a host f32 tensor of shape, which has a size of 0.
func emptyTensor(shape []int) *Tensor { return emptyTyped(shape, ggmlcgo.F32) }

// emptyTyped is an empty host tensor of shape and dtype (an i32 one holds
// no ints, any other no f32 values).
func emptyTyped(shape []int, dtype ggmlcgo.Type) *Tensor {
	t := &Tensor{shape: append([]int(nil), shape...), dtype: dtype}
	if dtype == ggmlcgo.I32 {
		t.ints = []int32{}
	} else {
		t.host = []float32{}
	}
	return t
}

// emptyOf is op's result of shape (which has no elements) from inputs
// (nil ones left out): empty, and recorded, so that each input gets its
// gradient, zeros (gradFn.call gives them for an empty output).
func (e *Engine) emptyOf(op string, shape []int, inputs ...*Tensor) *Tensor {
	return e.emptyRecorded(op, emptyTensor(shape), inputs...)
}

// emptyRecorded is emptyOf with the empty result y given (of a dtype).
func (e *Engine) emptyRecorded(op string, y *Tensor, inputs ...*Tensor) *Tensor {
	ins := slices.DeleteFunc(slices.Clone(inputs), func(t *Tensor) bool { return t == nil })
	e.record(y, op, ins, func(*Tensor) ([]*Tensor, error) { return nil, nil })
	return y
}

// opDtype is the dtype of an op's result from x: i32 for an i32 x (ops
// that take one keep it), f32 otherwise (ops compute in f32).
func opDtype(x *Tensor) ggmlcgo.Type {
	if x.storage().dtype == ggmlcgo.I32 {
		return ggmlcgo.I32
	}
	return ggmlcgo.F32
}

// errEmptyInput is the error of an op given an empty tensor it cannot
// compute with (an op's name is added by its caller).
func errEmptyInput(t *Tensor) error {
	return shapeErrorf("an input of shape %s has no elements, which this op does not take (sums, means, products, matrix products and cat do)", ShapeString(t.shape))
}

// filled is the tensor of shape full of v, the result of op over inputs
// of which one has no elements (a sum's 0, a product's 1): recorded on the
// tape so that each input's gradient is empty, as PyTorch's is (an input
// with no elements, or a matrix product's operands over a dim of size 0).
func (e *Engine) filled(op string, inputs []*Tensor, v float32, shape []int) (*Tensor, error) {
	y, err := Full(v, shape...)
	if err != nil {
		return nil, err
	}
	shapes := make([][]int, len(inputs))
	for i, in := range inputs {
		shapes[i] = in.shape
	}
	e.record(y, op, inputs, func(*Tensor) ([]*Tensor, error) {
		grads := make([]*Tensor, len(shapes))
		for i, sh := range shapes {
			grads[i] = emptyTensor(sh)
		}
		return grads, nil
	})
	return y, nil
}

// catEmpty is Cat of pieces some of which have no elements: those add
// nothing, and a 1-d one of size 0 may stand beside any shape (PyTorch's
// legacy rule). The others are joined; the join is recorded as an op of
// every piece, so that each empty piece gets its (empty) gradient.
func (e *Engine) catEmpty(ts []*Tensor, dim int) (*Tensor, error) {
	var like *Tensor // the first piece that is not a legacy 1-d empty one
	for _, t := range ts {
		if !(t.Dim() == 1 && t.shape[0] == 0) {
			like = t
			break
		}
	}
	if like == nil {
		return e.emptyRecorded("cat", emptyTyped([]int{0}, opDtype(ts[0])), ts...), nil
	}
	d, err := checkDim("cat", like.shape, dim)
	if err != nil {
		return nil, err
	}
	want, shape := like.Shape(), like.Shape() // want: every piece's shape outside d
	want[d], shape[d] = 0, 0
	var full []*Tensor
	for i, t := range ts {
		if t.Dim() == 1 && t.shape[0] == 0 {
			continue
		}
		s := t.Shape()
		if len(s) == len(want) {
			s[d] = 0
		}
		if !sameShape(s, want) {
			return nil, shapeErrorf("cat: tensor %d has shape %s, which differs from %s outside dim %d", i+1, ShapeString(t.shape), ShapeString(like.shape), d+1)
		}
		shape[d] += t.shape[d]
		if t.Numel() > 0 {
			full = append(full, t)
		}
	}
	if len(full) == 0 {
		return e.emptyRecorded("cat", emptyTyped(shape, opDtype(like)), ts...), nil
	}
	joined, err := e.Cat(full, d)
	if err != nil {
		return nil, err
	}
	off, st := joined.layout()
	y := viewOf(joined, joined.shape, off, st)
	inputs, shapes := []*Tensor{joined}, [][]int{}
	for _, t := range ts {
		if t.Numel() == 0 {
			inputs, shapes = append(inputs, t), append(shapes, t.shape)
		}
	}
	e.record(y, "cat", inputs, func(g *Tensor) ([]*Tensor, error) {
		grads := []*Tensor{g}
		for _, sh := range shapes {
			grads = append(grads, emptyTensor(sh))
		}
		return grads, nil
	})
	return y, nil
}
