package core

// Scatters, the transposes of the gathers (ops_sort.go, IndexSelect):
// index_add, scatter_add, and masked_select (a gather whose indices come
// from a mask). Each adds rows with ggml's get_rows_back, whose own
// gradient is the row lookup again.

// scatterRows is a [rows, cols] tensor of zeros with row i of src [n,
// cols] added to row idx[i] (0-based, checked; repeats add up). Its
// gradient to src picks the rows back.
func (e *Engine) scatterRows(src *Tensor, idx []int, rows int) (*Tensor, error) {
	if len(idx) == 0 { // no rows added (empty.go)
		return e.filled("scatter", []*Tensor{src}, 0, []int{rows, src.shape[src.Dim()-1]})
	}
	it, err := e.uploadInts(idx)
	if err != nil {
		return nil, err
	}
	y, err := e.rowsBack("scatter", src, idx, it, rows)
	if err != nil {
		return nil, err
	}
	e.record(y, "scatter", []*Tensor{src}, func(g *Tensor) ([]*Tensor, error) {
		gs, err := e.indexRows(g, idx)
		return []*Tensor{gs}, err
	})
	return y, nil
}

// IndexAdd is x with source's slices along dim added at the 0-based
// positions idx (source's size along dim is len(idx); its other dims are
// x's): PyTorch's index_add. Repeated indices add up.
func (e *Engine) IndexAdd(x *Tensor, dim int, idx []int, source *Tensor) (*Tensor, error) {
	d, err := checkDim("index_add", x.shape, dim)
	if err != nil {
		return nil, err
	}
	want := x.Shape()
	want[d] = len(idx)
	if !sameShape(source.shape, want) {
		return nil, shapeErrorf("index_add: source of shape %s for %d indices into dim %d of shape %s (expected %s)", ShapeString(source.shape), len(idx), d+1, ShapeString(x.shape), ShapeString(want))
	}
	for i, v := range idx {
		if v < 0 || v >= x.shape[d] {
			return nil, argErrorf("index_add: index %d (position %d) is out of range for dim %d of size %d", v+1, i+1, d+1, x.shape[d])
		}
	}
	if x.Numel() == 0 {
		return e.emptyOf("index_add", x.shape, x, source), nil
	}
	// Move dim d first, flatten the rest into rows, scatter, move back.
	axes := []int{d}
	for i := range x.shape {
		if i != d {
			axes = append(axes, i)
		}
	}
	inverse := make([]int, len(axes))
	for i, ax := range axes {
		inverse[ax] = i
	}
	cols := int(x.Numel()) / x.shape[d]
	var c chain
	front := c.do(func() (*Tensor, error) { return e.permute("index_add", source, axes) })
	rows := c.do(func() (*Tensor, error) { return e.Reshape(front, len(idx), cols) })
	added := c.do(func() (*Tensor, error) { return e.scatterRows(rows, idx, x.shape[d]) })
	shape := make([]int, len(axes))
	for i, ax := range axes {
		shape[i] = x.shape[ax]
	}
	back := c.do(func() (*Tensor, error) { return e.Reshape(added, shape...) })
	moved := c.do(func() (*Tensor, error) { return e.permute("index_add", back, inverse) })
	out := c.do(func() (*Tensor, error) { return e.Add(x, moved) })
	return out, c.err
}

// ScatterAdd is x with each element of src added at the position of x
// that index names: src's position with its coordinate along dim replaced
// by index's value there (0-based; index has src's shape, no dim larger
// than x's outside dim): PyTorch's scatter_add.
func (e *Engine) ScatterAdd(x *Tensor, dim int, idx []int, src *Tensor) (*Tensor, error) {
	return e.ScatterAddIndex(x, dim, idx, src.shape, src)
}

// ScatterAddIndex is ScatterAdd with an index of shape idxShape, which
// may be smaller than src: PyTorch 1.13's rule, index no larger than src
// in any dim nor than x outside dim, and only src's elements within
// index's shape added. src is narrowed to that shape first, so the rest of
// src gets a zero gradient (PyTorch 1.13's backward fails there instead).
func (e *Engine) ScatterAddIndex(x *Tensor, dim int, idx []int, idxShape []int, src *Tensor) (*Tensor, error) {
	d, err := checkDim("scatter_add", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if src.Dim() != x.Dim() || len(idxShape) != x.Dim() {
		return nil, shapeErrorf("scatter_add: index of shape %s and src of shape %s for a tensor of shape %s (all three need one rank)", ShapeString(idxShape), ShapeString(src.shape), ShapeString(x.shape))
	}
	for i, n := range idxShape {
		if n > src.shape[i] {
			return nil, shapeErrorf("scatter_add: index of shape %s is larger than src of shape %s in dim %d", ShapeString(idxShape), ShapeString(src.shape), i+1)
		}
	}
	offsets, err := linearOffsets("scatter_add", x.shape, d, idx, idxShape)
	if err != nil {
		return nil, err
	}
	var c chain
	part := src
	for i, n := range idxShape {
		if n < src.shape[i] {
			from := part
			part = c.do(func() (*Tensor, error) { return e.Narrow(from, i, 0, n) })
		}
	}
	rows := c.do(func() (*Tensor, error) { return e.Reshape(part, len(idx), 1) })
	added := c.do(func() (*Tensor, error) { return e.scatterRows(rows, offsets, int(x.Numel())) })
	back := c.do(func() (*Tensor, error) { return e.Reshape(added, x.shape...) })
	out := c.do(func() (*Tensor, error) { return e.Add(x, back) })
	return out, c.err
}

// MaskedSelect is the elements of x where mask (broadcast to x's shape) is
// nonzero, in order, as a 1-d tensor; its gradient goes back to them. The
// mask is read on the host (the result's size depends on it); none
// selected gives an empty tensor.
func (e *Engine) MaskedSelect(x, mask *Tensor) (*Tensor, error) {
	picked, err := e.maskPositions("masked_select", x, mask)
	if err != nil {
		return nil, err
	}
	var c chain
	rows := c.do(func() (*Tensor, error) { return e.Reshape(x, int(x.Numel()), 1) })
	sel := c.do(func() (*Tensor, error) { return e.indexRows(rows, picked) })
	out := c.do(func() (*Tensor, error) { return e.Reshape(sel, len(picked)) })
	return out, c.err
}

// maskPositions reads mask (broadcast to x's shape) on the host: the flat
// positions of its nonzero elements, in order.
func (e *Engine) maskPositions(op string, x, mask *Tensor) ([]int, error) {
	if err := checkMask(op, x, mask); err != nil {
		return nil, err
	}
	full, err := e.expandConst(mask, x.shape)
	if err != nil {
		return nil, err
	}
	m, err := full.Float32s()
	if err != nil {
		return nil, err
	}
	var picked []int
	for i, v := range m {
		if v != 0 {
			picked = append(picked, i)
		}
	}
	return picked, nil
}

// MaskedScatter is PyTorch's masked_scatter: x with its elements where
// mask (broadcast to x's shape) is nonzero replaced, in order, by src's
// first elements (src read flat, at least as many). The gradient goes to
// x's other elements and to the elements of src used.
func (e *Engine) MaskedScatter(x, mask, src *Tensor) (*Tensor, error) {
	return e.maskedScatter("masked_scatter", x, mask, src, false)
}

// MaskedPut is PyTorch's x[mask] = values out of place: values is 1-d,
// one for each element the mask selects, in order, or one element for all.
// The gradient goes to x's other elements and to the values.
func (e *Engine) MaskedPut(x, mask, values *Tensor) (*Tensor, error) {
	if values.Numel() == 1 { // broadcast, as PyTorch's: its gradient sums the selected elements'
		if err := checkMask("x[mask] = values", x, mask); err != nil {
			return nil, err
		}
		v, err := e.Reshape(values, 1)
		if err != nil {
			return nil, err
		}
		return e.Where(mask, Operand{T: v}, Operand{T: x})
	}
	if values.Dim() != 1 {
		return nil, shapeErrorf("x[mask] = values: values of shape %s; it must be 1-d, one value for each element the mask selects", ShapeString(values.shape))
	}
	return e.maskedScatter("x[mask] = values", x, mask, values, true)
}

func (e *Engine) maskedScatter(op string, x, mask, src *Tensor, exact bool) (*Tensor, error) {
	picked, err := e.maskPositions(op, x, mask)
	if err != nil {
		return nil, err
	}
	if n := int64(len(picked)); n > src.Numel() || exact && n != src.Numel() {
		return nil, shapeErrorf("%s: the mask selects %d elements, the values (shape %s) are %d", op, n, ShapeString(src.shape), src.Numel())
	}
	if len(picked) == 0 { // nothing replaced
		return e.Clone(x)
	}
	from := make([]int, x.Numel()) // the src element each position would take (0 where unmasked)
	for k, p := range picked {
		from[p] = k
	}
	var c chain
	flat := c.do(func() (*Tensor, error) { return e.Reshape(src, int(src.Numel())) })
	spread := c.do(func() (*Tensor, error) { return e.IndexSelect(flat, 0, from) })
	spread = c.do(func() (*Tensor, error) { return e.Reshape(spread, x.shape...) })
	return c.do(func() (*Tensor, error) { return e.Where(mask, Operand{T: spread}, Operand{T: x}) }), c.err
}
