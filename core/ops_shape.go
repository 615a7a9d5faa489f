package core

import (
	"fmt"
	"slices"
)

// Shape ops built on views and the movement primitives (ops_movement.go):
// select, unsqueeze, squeeze, flatten, unflatten, expand, flip, stack,
// chunk, split and tile, with PyTorch's names and semantics (dims 0-based
// here, negative from the end; luabind makes them 1-based). Views share
// storage as PyTorch's do; flip and tile copy, as PyTorch's do.

// restride is a view of x with the same elements in the same order under
// another shape (dims of size 1 added or removed); its gradient is g in
// x's shape.
func (e *Engine) restride(name string, x *Tensor, shape []int, strides []int64) *Tensor {
	off, _ := x.layout()
	y := viewOf(x, shape, off, strides)
	xshape := x.shape // the tape keeps no value
	e.record(y, name, []*Tensor{x}, func(g *Tensor) ([]*Tensor, error) {
		gx, err := e.Reshape(g, xshape...)
		return []*Tensor{gx}, err
	})
	return y
}

// Select is x's slice at index i (0-based) of dim, with that dim removed:
// a view (x[i] is Select(x, 0, i)). A 1-d x gives a 1-element tensor:
// gglua has no 0-d tensors.
func (e *Engine) Select(x *Tensor, dim, i int) (*Tensor, error) {
	d, err := checkDim("select", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= x.shape[d] {
		return nil, argErrorf("select: index %d is out of range for dim %d (size %d) of shape %s", i+1, d+1, x.shape[d], ShapeString(x.shape))
	}
	slice, err := e.Narrow(x, d, i, 1)
	if err != nil || x.Dim() == 1 {
		return slice, err
	}
	_, st := slice.layout()
	shape := append(append([]int(nil), slice.shape[:d]...), slice.shape[d+1:]...)
	strides := append(append([]int64(nil), st[:d]...), st[d+1:]...)
	return e.restride("select", slice, shape, strides), nil
}

// Unsqueeze inserts a dim of size 1 at dim (0..Dim(), negative counting
// from the end of the result): a view.
func (e *Engine) Unsqueeze(x *Tensor, dim int) (*Tensor, error) {
	d := dim
	if d < 0 {
		d += x.Dim() + 1
	}
	if d < 0 || d > x.Dim() {
		return nil, shapeErrorf("unsqueeze: dim %d out of range for a %d-d tensor of shape %s (dims are 1..%d, or -1..-%d from the end)", oneBased([]int{dim})[0], x.Dim(), ShapeString(x.shape), x.Dim()+1, x.Dim()+1)
	}
	if x.Dim() == 4 {
		return nil, shapeErrorf("unsqueeze: a 4-d tensor of shape %s cannot get a fifth dim (ggml has four)", ShapeString(x.shape))
	}
	_, st := x.layout()
	shape := append(append(append([]int(nil), x.shape[:d]...), 1), x.shape[d:]...)
	strides := append(append(append([]int64(nil), st[:d]...), 0), st[d:]...) // viewOf packs a size-1 dim's stride
	return e.restride("unsqueeze", x, shape, strides), nil
}

// Squeeze removes dims of size 1: all of them (dims empty), or the given
// ones (a given dim whose size is not 1 stays, as in PyTorch). A view; a
// tensor of ones keeps one dim (gglua has no 0-d tensors).
func (e *Engine) Squeeze(x *Tensor, dims ...int) (*Tensor, error) {
	drop := make([]bool, x.Dim())
	if len(dims) == 0 {
		for i, n := range x.shape {
			drop[i] = n == 1
		}
	}
	for _, dim := range dims {
		d, err := checkDim("squeeze", x.shape, dim)
		if err != nil {
			return nil, err
		}
		drop[d] = x.shape[d] == 1
	}
	_, st := x.layout()
	var shape []int
	var strides []int64
	for i := range x.shape {
		if !drop[i] {
			shape, strides = append(shape, x.shape[i]), append(strides, st[i])
		}
	}
	if len(shape) == 0 {
		shape, strides = []int{1}, []int64{1}
	}
	if len(shape) == x.Dim() {
		return x, nil
	}
	return e.restride("squeeze", x, shape, strides), nil
}

// Flatten joins dims start..end (inclusive) into one: a view of a
// contiguous x, else a copy (PyTorch's flatten is reshape).
func (e *Engine) Flatten(x *Tensor, start, end int) (*Tensor, error) {
	s, err := checkDim("flatten", x.shape, start)
	if err != nil {
		return nil, err
	}
	t, err := checkDim("flatten", x.shape, end)
	if err != nil {
		return nil, err
	}
	if s > t {
		return nil, argErrorf("flatten: start dim %d comes after end dim %d", s+1, t+1)
	}
	n := 1
	for _, size := range x.shape[s : t+1] {
		n *= size
	}
	shape := append(append(append([]int(nil), x.shape[:s]...), n), x.shape[t+1:]...)
	return e.Reshape(x, shape...)
}

// Unflatten splits dim into sizes (one may be -1): Reshape's view or copy.
func (e *Engine) Unflatten(x *Tensor, dim int, sizes []int) (*Tensor, error) {
	d, err := checkDim("unflatten", x.shape, dim)
	if err != nil {
		return nil, err
	}
	part, err := inferShape("unflatten", &Tensor{shape: []int{x.shape[d]}}, sizes)
	if err != nil {
		return nil, err
	}
	shape := append(append(append([]int(nil), x.shape[:d]...), part...), x.shape[d+1:]...)
	if len(shape) > 4 {
		return nil, shapeErrorf("unflatten: shape %s has more than ggml's four dims", ShapeString(shape))
	}
	return e.Reshape(x, shape...)
}

// Expand repeats dims of size 1 (and adds leading dims) up to sizes; -1
// keeps a dim's size. PyTorch's expand is a view with stride 0; gglua's is
// a copy (ggml's kernels expect real strides), so writing into it does not
// reach x: PyTorch refuses such writes anyway.
func (e *Engine) Expand(x *Tensor, sizes []int) (*Tensor, error) {
	if len(sizes) < x.Dim() {
		return nil, shapeErrorf("expand: %d sizes given for a %d-d tensor of shape %s", len(sizes), x.Dim(), ShapeString(x.shape))
	}
	lead := len(sizes) - x.Dim()
	shape := make([]int, len(sizes))
	for i, n := range sizes {
		own := 1
		if i >= lead {
			own = x.shape[i-lead]
		}
		switch {
		case n == -1 && i >= lead:
			n = own
		case n < 0:
			return nil, argErrorf("expand: bad size %d at position %d of %v", n, i+1, sizes)
		case own != 1 && n != own:
			return nil, shapeErrorf("expand: dim %d of shape %s has size %d, which cannot expand to %d", i-lead+1, ShapeString(x.shape), own, n)
		}
		shape[i] = n
	}
	if _, err := checkShape(shape); err != nil {
		return nil, err
	}
	base, err := e.Reshape(x, append(ones(lead), x.shape...)...)
	if err != nil {
		return nil, err
	}
	return e.expandTo(base, shape)
}

func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// Flip reverses x along each of dims: a copy, as PyTorch's.
func (e *Engine) Flip(x *Tensor, dims ...int) (*Tensor, error) {
	out := x
	seen := make([]bool, x.Dim())
	for _, dim := range dims {
		d, err := checkDim("flip", x.shape, dim)
		if err != nil {
			return nil, err
		}
		if seen[d] {
			return nil, argErrorf("flip: dim %d appears twice", d+1)
		}
		seen[d] = true
		idx := make([]int, x.shape[d])
		for i := range idx {
			idx[i] = len(idx) - 1 - i
		}
		if out, err = e.IndexSelect(out, d, idx); err != nil {
			return nil, err
		}
	}
	if out == x {
		return e.Clone(x)
	}
	return out, nil
}

// Stack joins tensors of one shape along a new dim.
func (e *Engine) Stack(ts []*Tensor, dim int) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, argErrorf("stack: no tensors")
	}
	parts := make([]*Tensor, len(ts))
	for i, t := range ts {
		if !sameShape(t.shape, ts[0].shape) {
			return nil, shapeErrorf("stack: tensor %d has shape %s, tensor 1 has %s", i+1, ShapeString(t.shape), ShapeString(ts[0].shape))
		}
		var err error
		if parts[i], err = e.Unsqueeze(t, dim); err != nil {
			return nil, err
		}
	}
	d := dim
	if d < 0 {
		d += ts[0].Dim() + 1
	}
	return e.Cat(parts, d)
}

// Split cuts x along dim into views of size rows each (the last may be
// shorter), as PyTorch's split with an integer.
func (e *Engine) Split(x *Tensor, size, dim int) ([]*Tensor, error) {
	d, err := checkDim("split", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if x.shape[d] == 0 && size >= 0 { // one empty piece, as PyTorch's
		return e.SplitSizes(x, []int{0}, d)
	}
	if size < 1 {
		return nil, argErrorf("split: size %d must be at least 1", size)
	}
	if pieces := (x.shape[d] + size - 1) / size; pieces > MaxPieces {
		return nil, argErrorf("split: %d pieces of dim %d (size %d) is more than one call makes (at most %d): narrow first, or split in steps", pieces, d+1, x.shape[d], MaxPieces)
	}
	var sizes []int
	for at := 0; at < x.shape[d]; at += size {
		sizes = append(sizes, min(size, x.shape[d]-at))
	}
	return e.SplitSizes(x, sizes, d)
}

// MaxPieces bounds the views one split or chunk makes: each is a Go
// object and a Lua value (8M of them took 4.7 GB and 15 s; 2^18, ~150 MB).
const MaxPieces = 1 << 18

// SplitSizes cuts x along dim into views of the given sizes, which must
// add up to the dim's size.
func (e *Engine) SplitSizes(x *Tensor, sizes []int, dim int) ([]*Tensor, error) {
	d, err := checkDim("split", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if len(sizes) > MaxPieces {
		return nil, argErrorf("split: %d pieces is more than one call makes (at most %d)", len(sizes), MaxPieces)
	}
	total := 0
	for i, n := range sizes {
		if n < 0 || n > x.shape[d] {
			return nil, argErrorf("split: size %d (position %d) is outside 0..%d", n, i+1, x.shape[d])
		}
		total += n
	}
	if total != x.shape[d] {
		return nil, shapeErrorf("split: sizes %v add up to %d, but dim %d of shape %s has %d", sizes, total, d+1, ShapeString(x.shape), x.shape[d])
	}
	out := make([]*Tensor, len(sizes))
	at := 0
	for i, n := range sizes {
		if out[i], err = e.Narrow(x, d, at, n); err != nil {
			return nil, err
		}
		at += n
	}
	return out, nil
}

// Chunk cuts x along dim into at most n views of equal size (the last may
// be smaller), as PyTorch's chunk: each is ceil(size/n) long, so fewer
// than n may come back.
func (e *Engine) Chunk(x *Tensor, n, dim int) ([]*Tensor, error) {
	d, err := checkDim("chunk", x.shape, dim)
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, argErrorf("chunk: %d chunks; at least 1", n)
	}
	if n > MaxPieces && x.shape[d] > MaxPieces {
		return nil, argErrorf("chunk: %d chunks of dim %d (size %d) is more than one call makes (at most %d): narrow first, or chunk in steps", min(n, x.shape[d]), d+1, x.shape[d], MaxPieces)
	}
	if x.shape[d] == 0 { // n empty chunks, as PyTorch's
		if n > MaxPieces {
			return nil, argErrorf("chunk: %d chunks is more than one call makes (at most %d)", n, MaxPieces)
		}
		return e.SplitSizes(x, make([]int, n), d)
	}
	return e.Split(x, (x.shape[d]+n-1)/n, d)
}

// Tile repeats x reps[i] times along dim i (PyTorch's tile; Lua cannot
// name a method repeat). Fewer reps than dims repeat the last dims; more
// add leading dims. A copy: each repeated dim gets a new dim of size 1 in
// front of it, expanded to reps[i] and flattened into it.
func (e *Engine) Tile(x *Tensor, reps []int) (*Tensor, error) {
	if len(reps) == 0 {
		return nil, argErrorf("tile: no repetitions")
	}
	n := max(len(reps), x.Dim())
	reps = append(ones(n-len(reps)), reps...)
	shape := append(ones(n-x.Dim()), x.shape...)
	final := make([]int, n)
	for d, r := range reps {
		if r < 0 {
			return nil, argErrorf("tile: %d repetitions of dim %d; at least 0", r, d+1)
		}
		if int64(r)*int64(shape[d]) > 1<<40 {
			return nil, shapeErrorf("tile: %d repetitions of dim %d (size %d) are too many", r, d+1, shape[d])
		}
		final[d] = r * shape[d]
	}
	if _, err := checkShape(final); err != nil {
		return nil, fmt.Errorf("tile: %w", err)
	}
	if numel(final) == 0 { // empty: nothing to repeat (and no large step to build first)
		return e.emptyRecorded("tile", emptyTyped(final, opDtype(x)), x), nil
	}
	if n == 4 && !slices.Equal(reps, []int{1, 1, 1, 1}) {
		return nil, shapeErrorf("tile: a 4-d result needs a fifth dim to repeat into (ggml has four); reshape to fewer dims first")
	}
	out, err := e.Reshape(x, shape...)
	if err != nil {
		return nil, err
	}
	copied := false
	for d, r := range reps {
		if r == 1 {
			continue
		}
		copied = true
		var c chain
		u := c.do(func() (*Tensor, error) { return e.Unsqueeze(out, d) })
		sizes := u.Shape()
		sizes[d] = r
		ex := c.do(func() (*Tensor, error) { return e.Expand(u, sizes) })
		out = c.do(func() (*Tensor, error) { return e.Flatten(ex, d, d+1) })
		if c.err != nil {
			return nil, c.err
		}
	}
	if !copied {
		return e.Clone(out)
	}
	return out, nil
}

// Roll shifts x's elements along dims (0-based, negative from the end) by
// shifts, wrapping around, as PyTorch's roll; with no dims, x is rolled
// as if flattened (one shift). Its gradient rolls back.
func (e *Engine) Roll(x *Tensor, shifts, dims []int) (*Tensor, error) {
	if len(dims) == 0 {
		if len(shifts) != 1 {
			return nil, shapeErrorf("roll: %d shifts without dims (expected one, for the flattened tensor)", len(shifts))
		}
		flat, err := e.Reshape(x, int(x.Numel()))
		if err != nil {
			return nil, err
		}
		y, err := e.Roll(flat, shifts, []int{0})
		if err != nil {
			return nil, err
		}
		return e.Reshape(y, x.shape...)
	}
	if len(shifts) != len(dims) {
		return nil, shapeErrorf("roll: %d shifts for %d dims", len(shifts), len(dims))
	}
	if x.Numel() == 0 {
		for _, dim := range dims {
			if _, err := checkDim("roll", x.shape, dim); err != nil {
				return nil, err
			}
		}
		return e.emptyOf("roll", x.shape, x), nil
	}
	y := x
	for i, dim := range dims {
		d, err := checkDim("roll", x.shape, dim)
		if err != nil {
			return nil, err
		}
		n := x.shape[d]
		s := ((shifts[i] % n) + n) % n
		if s == 0 {
			continue
		}
		tail, err := e.Narrow(y, d, n-s, s)
		if err != nil {
			return nil, err
		}
		head, err := e.Narrow(y, d, 0, n-s)
		if err != nil {
			return nil, err
		}
		if y, err = e.Cat([]*Tensor{tail, head}, d); err != nil {
			return nil, err
		}
	}
	if y == x {
		return e.Clone(x)
	}
	return y, nil
}
