package core

import (
	"math"
	"sort"
)

// Sorting and gathering. The order is decided on the host, where NaN and
// ties can be made PyTorch's exactly (NaN above everything, equal values
// in their original order — a stable sort; ggml's argsort leaves both to
// the backend); the values then move by Gather, whose gradient puts each
// one back where it came from.

// layoutAlong describes a contiguous tensor of shape seen along dim d:
// outer blocks, the dim's size, and the inner stride.
func layoutAlong(shape []int, d int) (outer, n, inner int) {
	outer, inner = 1, 1
	for _, s := range shape[:d] {
		outer *= s
	}
	for _, s := range shape[d+1:] {
		inner *= s
	}
	return outer, shape[d], inner
}

// Gather is PyTorch's gather: out has idx's shape, and out at position p
// is x at p with its coordinate along dim replaced by idx at p (0-based).
// idx has x's rank and no dim larger than x's (dim aside). Its gradient
// adds each element's gradient back to where it came from.
func (e *Engine) Gather(x *Tensor, dim int, idx []int, idxShape []int) (*Tensor, error) {
	d, err := checkDim("gather", x.shape, dim)
	if err != nil {
		return nil, err
	}
	offsets, err := linearOffsets("gather", x.shape, d, idx, idxShape)
	if err != nil {
		return nil, err
	}
	var c chain
	flat := c.do(func() (*Tensor, error) { return e.Reshape(x, int(x.Numel()), 1) })
	picked := c.do(func() (*Tensor, error) { return e.indexRows(flat, offsets) })
	out := c.do(func() (*Tensor, error) { return e.Reshape(picked, idxShape...) })
	return out, c.err
}

// linearOffsets turns 0-based indices along dim d, laid out as idxShape,
// into offsets in a contiguous tensor of shape: position p's offset is p's
// with its coordinate along d replaced by idx at p. idxShape has shape's
// rank and no dim larger outside d (PyTorch's rule for gather and
// scatter); each index is checked.
func linearOffsets(op string, shape []int, d int, idx []int, idxShape []int) ([]int, error) {
	if len(idxShape) != len(shape) {
		return nil, shapeErrorf("%s: index of shape %s for a %d-d tensor of shape %s (they need the same rank)", op, ShapeString(idxShape), len(shape), ShapeString(shape))
	}
	n, err := checkShape(idxShape)
	if err != nil {
		return nil, err
	}
	if int64(len(idx)) != n {
		return nil, shapeErrorf("%s: %d indices for an index of shape %s", op, len(idx), ShapeString(idxShape))
	}
	for i := range idxShape {
		if i != d && idxShape[i] > shape[i] {
			return nil, shapeErrorf("%s: index of shape %s is larger than %s outside dim %d", op, ShapeString(idxShape), ShapeString(shape), d+1)
		}
	}
	strides := contiguousStrides(shape)
	offsets := make([]int, len(idx))
	coord := make([]int, len(idxShape))
	for p, v := range idx {
		if v < 0 || v >= shape[d] {
			return nil, argErrorf("%s: index %d (element %d) is out of range for dim %d of size %d", op, v+1, p+1, d+1, shape[d])
		}
		off := 0
		for i, c := range coord {
			if i == d {
				c = v
			}
			off += c * int(strides[i])
		}
		offsets[p] = off
		for i := len(coord) - 1; i >= 0; i-- { // the next position, row-major
			if coord[i]++; coord[i] < idxShape[i] {
				break
			}
			coord[i] = 0
		}
	}
	return offsets, nil
}

// Sort sorts x along dim and returns the values and their 0-based indices
// in x (an f32 tensor, not differentiated): ascending with NaN last, or
// descending with NaN first, equal values in their original order.
func (e *Engine) Sort(x *Tensor, dim int, descending bool) (*Tensor, *Tensor, error) {
	d, err := checkDim("sort", x.shape, dim)
	if err != nil {
		return nil, nil, err
	}
	v, err := x.Float32s()
	if err != nil {
		return nil, nil, err
	}
	outer, n, inner := layoutAlong(x.shape, d)
	idx := make([]int, len(v))
	order := make([]int, n)
	less := func(a, b float32) bool { // NaN is the largest
		if math.IsNaN(float64(b)) {
			return !math.IsNaN(float64(a))
		}
		return a < b
	}
	for o := range outer {
		for in := range inner {
			at := func(k int) float32 { return v[(o*n+k)*inner+in] }
			for k := range order {
				order[k] = k
			}
			sort.SliceStable(order, func(i, j int) bool {
				if descending {
					return less(at(order[j]), at(order[i]))
				}
				return less(at(order[i]), at(order[j]))
			})
			for k, src := range order {
				idx[(o*n+k)*inner+in] = src
			}
		}
	}
	vals, err := e.Gather(x, d, idx, x.shape)
	if err != nil {
		return nil, nil, err
	}
	fidx := make([]float32, len(idx))
	for i, k := range idx {
		fidx[i] = float32(k)
	}
	indices, err := FromFloat32(fidx, x.shape...)
	return vals, indices, err
}

// TopK is the k largest (or smallest) values along dim, sorted, with their
// 0-based indices.
func (e *Engine) TopK(x *Tensor, k, dim int, largest bool) (*Tensor, *Tensor, error) {
	d, err := checkDim("topk", x.shape, dim)
	if err != nil {
		return nil, nil, err
	}
	if k < 0 || k > x.shape[d] {
		return nil, nil, argErrorf("topk: k = %d is outside 0..%d (dim %d of shape %s)", k, x.shape[d], d+1, ShapeString(x.shape))
	}
	vals, idx, err := e.Sort(x, d, largest)
	if err != nil {
		return nil, nil, err
	}
	if vals, err = e.Narrow(vals, d, 0, k); err != nil {
		return nil, nil, err
	}
	if idx, err = e.Narrow(idx, d, 0, k); err != nil {
		return nil, nil, err
	}
	if vals, err = e.Contiguous(vals); err != nil {
		return nil, nil, err
	}
	idx, err = e.Contiguous(idx)
	return vals, idx, err
}
