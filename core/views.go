package core

import (
	"errors"
	"fmt"

	"github.com/gglua/gglua/ggmlcgo"
)

// Views share storage with their base, as PyTorch's do: narrow, transpose,
// permute and the reshape of a contiguous tensor return a view, so an
// in-place op through the view changes the base, and a view read after the
// base changed sees the change.
//
// A view holds no memory. Its base is always a tensor with storage (a view
// of a view points at the first base) and its layout is an element offset
// and one stride per dim into the base's elements. Whenever an op reads a
// view, its node is a ggml view of the base's current node made contiguous
// (input); reading its values gathers them from the base's (gather); writing
// through it scatters into the base (assignView).
//
// The version counter lives on the storage: every in-place write bumps it,
// and backward refuses a gradient whose saved inputs changed since the
// forward used them (autograd.go).

// storage is the tensor that holds t's elements: t itself, or its base.
func (t *Tensor) storage() *Tensor {
	if t.base != nil {
		return t.base
	}
	return t
}

// IsView reports whether t shares another tensor's storage.
func (t *Tensor) IsView() bool { return t.base != nil }

// contiguousStrides are the strides of a packed tensor of shape.
func contiguousStrides(shape []int) []int64 {
	st := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= int64(shape[i])
	}
	return st
}

// layout is t's place in its storage: an element offset and strides.
func (t *Tensor) layout() (int64, []int64) {
	if t.base != nil {
		return t.offset, t.strides
	}
	return 0, contiguousStrides(t.shape)
}

// contiguous reports whether t's elements are packed in order in its
// storage (a view may still start at an offset).
func (t *Tensor) contiguous() bool {
	_, st := t.layout()
	want := contiguousStrides(t.shape)
	for i := range st {
		if t.shape[i] != 1 && st[i] != want[i] {
			return false
		}
	}
	return true
}

// viewOf makes a view of x's storage with the given shape and layout.
func viewOf(x *Tensor, shape []int, offset int64, strides []int64) *Tensor {
	base := x.storage()
	// A dim of size 1 never steps, so its stride is free: give it the packed
	// one, which ggml's contiguity checks expect.
	strides = append([]int64(nil), strides...)
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 1 {
			strides[i] = 1
			if i < len(shape)-1 {
				strides[i] = strides[i+1] * int64(shape[i+1])
			}
		}
	}
	return &Tensor{shape: append([]int(nil), shape...), dtype: base.dtype, engine: base.engine,
		base: base, offset: offset, strides: strides}
}

// viewGeometry is t's layout in ggml's terms for a base of elem-byte
// elements: ne innermost first and the byte strides nb1..nb3. ggml's views
// step one element along ne0, so a view whose innermost stride is not 1
// gets a leading ne0 of 1 (lead). ok is false when that needs a fifth dim.
func viewGeometry(t *Tensor, elem int64) (ne [ggmlcgo.MaxDims]int64, nb [ggmlcgo.MaxDims - 1]int64, lead, ok bool) {
	return layoutGeometry(t.shape, t.strides, elem)
}

// layoutGeometry is viewGeometry for a view of shape and (element) strides.
func layoutGeometry(shape []int, strides []int64, elem int64) (ne [ggmlcgo.MaxDims]int64, nb [ggmlcgo.MaxDims - 1]int64, lead, ok bool) {
	if n := len(shape); shape[n-1] > 1 && strides[n-1] != 1 {
		if n == ggmlcgo.MaxDims {
			return ne, nb, false, false
		}
		shape, strides, lead = append(append([]int(nil), shape...), 1), append(append([]int64(nil), strides...), 1), true
	}
	n := len(shape)
	for k := range ne {
		ne[k] = 1
		if k < n {
			ne[k] = int64(shape[n-1-k])
		}
	}
	for k := 1; k < ggmlcgo.MaxDims; k++ {
		switch {
		case k < n:
			nb[k-1] = strides[n-1-k] * elem
		case k == 1:
			nb[k-1] = elem * ne[0]
		default:
			nb[k-1] = nb[k-2] * ne[k-1]
		}
	}
	return ne, nb, lead, true
}

// viewNode is the strided ggml view of b (the node of t's base) that t is.
func (e *Engine) viewNode(c ctx, b node, t *Tensor) (node, bool, error) {
	elem := b.Type().Size()
	ne, nb, lead, ok := viewGeometry(t, elem)
	if !ok {
		return node{}, false, fmt.Errorf("view: ggml cannot express a 4-d view whose innermost stride is %d", t.strides[len(t.strides)-1])
	}
	v, err := c.View(b, ne, nb, t.offset*elem)
	return v, lead, err
}

// viewInput is the node through which an op reads view t: a strided ggml
// view of its base's node, made contiguous.
func (e *Engine) viewInput(t *Tensor) (node, error) {
	b, err := e.input(t.base) // f32 (half storage is cast first)
	if err != nil {
		return node{}, err
	}
	c, err := e.nodeContext()
	if err != nil {
		return node{}, err
	}
	if pre, ok := transposedFrom(t); ok {
		// The transpose of the two innermost dims of a packed base (as
		// Matmul makes): the fast blocked kernel on the CPU.
		if !sameShape(pre, t.base.shape) {
			if b, err = reshapeNode(c, b, ne4(pre)); err != nil {
				return node{}, err
			}
		}
		return e.transposeNode(c, b)
	}
	if _, _, _, ok := viewGeometry(t, 4); !ok {
		if v, ok, err := e.permutedView(c, b, t); ok || err != nil {
			return v, err
		}
		return e.gatherInput(t)
	}
	v, lead, err := e.viewNode(c, b, t)
	if err != nil || (!lead && t.contiguous()) {
		return v, err // a packed view is read as it is
	}
	out, err := e.contNode(c, v)
	if err != nil || !lead {
		return out, err
	}
	return c.Reshape(out, ne4(t.shape))
}

// rowsInput is the node through which an op that reads strided rows
// (ggml's mul_mat: any steps between rows and matrices, one element apart
// within a row) reads t: a view whose last dim is packed is read in place,
// a strided ggml view of its base's node; anything else as input reads it.
func (e *Engine) rowsInput(t *Tensor) (node, error) { return e.rowsRead(t, e.input) }

// storedRowsInput is rowsInput with t's values in the type t stores them
// in (bf16 heads for the bf16 attention kernel), where readsRowsInPlace.
func (e *Engine) storedRowsInput(t *Tensor) (node, error) { return e.rowsRead(t, e.storedInput) }

// readsRowsInPlace reports whether rowsInput reads t as its own node or a
// strided view of its base's, not a copy.
func readsRowsInPlace(t *Tensor) bool {
	n := len(t.shape)
	if t.base == nil {
		return true
	}
	if t.storage().dtype == ggmlcgo.I32 || (t.strides[n-1] != 1 && t.shape[n-1] != 1) {
		return false
	}
	_, _, lead, ok := viewGeometry(t, 4)
	return ok && !lead
}

func (e *Engine) rowsRead(t *Tensor, read func(*Tensor) (node, error)) (node, error) {
	if t.base == nil || !readsRowsInPlace(t) {
		return read(t)
	}
	b, err := read(t.base)
	if err != nil {
		return node{}, err
	}
	c, err := e.nodeContext()
	if err != nil {
		return node{}, err
	}
	v, _, err := e.viewNode(c, b, t)
	return v, err
}

// reshapeNode is b with the shape ne: its memory reinterpreted when b is
// packed (the base of a view always is), a copy otherwise.
func reshapeNode(c ctx, b node, ne [ggmlcgo.MaxDims]int64) (node, error) {
	if b.IsContiguous() {
		return c.ReshapeView(b, ne)
	}
	return c.Reshape(b, ne)
}

// contNode packs a strided node: on the CPU, where its rows are contiguous
// (heads moved next to the batch, a narrow), with gglua's row copy, one
// memcpy a row, where ggml's copy went element by element.
func (e *Engine) contNode(c ctx, a node) (node, error) {
	if e.backend.IsCPU() && a.Type() == ggmlcgo.F32 {
		if out, err := c.ContRowsCPU(a); err == nil {
			return out, nil
		}
	}
	return c.Cont(a)
}

// packed is a, packed by contNode when it is strided: what gglua's
// kernels read.
func (e *Engine) packed(c ctx, a node) (node, error) {
	if a.IsContiguous() {
		return a, nil
	}
	return e.contNode(c, a)
}

// kernelOp is the op name computed by one of gglua's kernels, kernel, over
// its inputs packed.
func (e *Engine) kernelOp(name string, shape []int, inputs []*Tensor, kernel func(c ctx, in []node) (node, error)) (*Tensor, error) {
	return e.kernelOpReading(name, shape, inputs, e.input, kernel)
}

// kernelOpReading is kernelOp with the inputs read by read (e.storedInput:
// a bf16 input as it is stored).
func (e *Engine) kernelOpReading(name string, shape []int, inputs []*Tensor, read func(*Tensor) (node, error), kernel func(c ctx, in []node) (node, error)) (*Tensor, error) {
	return e.newOpReading(name, shape, inputs, read, func(c ctx, in []node) (node, error) {
		packed := make([]node, len(in))
		for i, a := range in {
			var err error
			if packed[i], err = e.packed(c, a); err != nil {
				return node{}, err
			}
		}
		return kernel(c, packed)
	})
}

// transposedFrom reports whether t is exactly the transpose of the two
// innermost dims of its packed base, and the shape it was transposed from.
func transposedFrom(t *Tensor) ([]int, bool) {
	n := len(t.shape)
	if n < 2 || t.offset != 0 || t.Numel() != t.base.Numel() || t.shape[n-1] == 1 || t.shape[n-2] == 1 {
		return nil, false
	}
	pre := append([]int(nil), t.shape...)
	pre[n-1], pre[n-2] = pre[n-2], pre[n-1]
	want := contiguousStrides(pre)
	want[n-1], want[n-2] = want[n-2], want[n-1]
	for i := range want {
		if want[i] != t.strides[i] && t.shape[i] != 1 {
			return nil, false
		}
	}
	return pre, true
}

// permutedView reads a 4-d view t whose innermost dim is not its packed
// one (attention's K transposed, of packed heads or of heads split from a
// projection)
// through a ggml view of its base with the packed dim innermost, permuted
// back and made contiguous. ok is false when t has no packed dim.
func (e *Engine) permutedView(c ctx, b node, t *Tensor) (node, bool, error) {
	n, p := len(t.shape), -1
	for d := n - 1; d >= 0 && p < 0; d-- {
		if t.strides[d] == 1 && t.shape[d] > 1 {
			p = d
		}
	}
	if p < 0 || n > ggmlcgo.MaxDims {
		return node{}, false, nil
	}
	order := make([]int, 0, n) // the view's dims, t's dim p last
	for d := range n {
		if d != p {
			order = append(order, d)
		}
	}
	order = append(order, p)
	shape, strides := make([]int, n), make([]int64, n)
	for j, d := range order {
		shape[j], strides[j] = t.shape[d], t.strides[d]
	}
	elem := b.Type().Size()
	ne, nb, lead, ok := layoutGeometry(shape, strides, elem)
	if !ok || lead {
		return node{}, false, nil
	}
	v, err := c.View(b, ne, nb, t.offset*elem)
	if err != nil {
		return node{}, true, err
	}
	var axes [ggmlcgo.MaxDims]int
	for i := range axes {
		axes[i] = i
	}
	for j, d := range order { // the view's dim j (ne n-1-j) is t's dim d (ne n-1-d)
		axes[n-1-j] = n - 1 - d
	}
	v, err = c.Permute(v, axes) // packed
	return v, true, err
}

// gatherInput uploads a view's gathered values: the rare 4-d view whose
// innermost stride is not 1, which ggml's views cannot express.
func (e *Engine) gatherInput(t *Tensor) (node, error) {
	v, err := t.gather()
	if err != nil {
		return node{}, err
	}
	h, err := FromFloat32(v, t.shape...)
	if err != nil {
		return node{}, err
	}
	return e.input(h)
}

// gather reads a view's elements from its base.
//
// A small view of a large base not on the host (a logit of a [T, vocab]
// result) is copied by the engine and read alone: reading the whole base
// to pick a few values took 0.5 s for a 512 x 32000 one.
func (t *Tensor) gather() ([]float32, error) {
	if b := t.base; b.host == nil && b.engine != nil && b.storage().dtype == ggmlcgo.F32 && t.Numel()*16 <= b.Numel() {
		y, err := b.engine.newOp("contiguous", t.shape, []*Tensor{t}, func(c ctx, in []node) (node, error) { return c.Cont(in[0]) })
		if err != nil {
			return nil, err
		}
		return y.Float32s()
	}
	src, err := t.base.Float32s()
	if err != nil {
		return nil, err
	}
	return gatherView(t, src), nil
}

// gatherView is view t's elements picked from its base's values src.
func gatherView[T any](t *Tensor, src []T) []T {
	out := make([]T, t.Numel())
	idx := make([]int, len(t.shape))
	for i := range out {
		pos := t.offset
		for k, j := range idx {
			pos += int64(j) * t.strides[k]
		}
		out[i] = src[pos]
		for k := len(idx) - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < t.shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	return out
}

// assignView writes src's values through view dst into its base.
func (e *Engine) assignView(dst, src *Tensor) error {
	base := dst.base
	if base.gradFn != nil {
		return fmt.Errorf("copy_: in-place change of a tensor the tape needs (it was computed by %s); use an out-of-place op", base.gradFn.name)
	}
	if base.requiresGrad && e.recording() {
		return errors.New("copy_: in-place change of a parameter inside with_grad_tape; do it outside the tape or inside no_grad")
	}
	if err := e.checkWrittenGrad(src); err != nil {
		return err
	}
	if dst.Numel() == 0 { // nothing to write
		return nil
	}
	if base.host != nil {
		v, err := src.Float32s()
		if err != nil {
			return err
		}
		idx := make([]int, len(dst.shape))
		for i := range v {
			pos := dst.offset
			for k, j := range idx {
				pos += int64(j) * dst.strides[k]
			}
			base.host[pos] = v[i]
			for k := len(idx) - 1; k >= 0; k-- {
				if idx[k]++; idx[k] < dst.shape[k] {
					break
				}
				idx[k] = 0
			}
		}
		base.version++
		return nil
	}
	if base.engine != e {
		return errors.New("copy_: tensor belongs to another runtime")
	}
	// The base must be placed to be written in place: compute what is
	// pending (its own value included), write, and compute the write now, so
	// that no later in-place update chains after a partial one.
	if err := e.Realize(); err != nil {
		return err
	}
	if base.host != nil { // a compaction after the compute moved it to the host
		return e.assignView(dst, src)
	}
	if base.handle == nil {
		return errDropped
	}
	// Half storage, a view ggml cannot express, or a strided view off the
	// CPU (ggml-cuda's copy into a strided view was seen to leave the base
	// unchanged on an H200): write the whole base, its values with the
	// view's replaced, converted by the copy.
	if _, _, _, ok := viewGeometry(dst, 4); base.dtype != ggmlcgo.F32 || !ok || (!e.backend.IsCPU() && !dst.contiguous()) {
		v, err := base.Float32s()
		if err != nil {
			return err
		}
		sv, err := src.Float32s()
		if err != nil {
			return err
		}
		h, err := FromFloat32(append([]float32(nil), v...), base.shape...)
		if err != nil {
			return err
		}
		if err := e.assignView(viewOf(h, dst.shape, dst.offset, dst.strides), mustHost(sv, dst.shape)); err != nil {
			return err
		}
		if err := e.writeInPlace(base, h); err != nil {
			return err
		}
		base.version++
		return e.Realize()
	}
	into := viewOf(base, dst.shape, dst.offset, dst.strides)
	if err := e.inPlace(base, []*Tensor{src}, func(c ctx, b node, in []node) (node, error) {
		v, lead, err := e.viewNode(c, b, into)
		if err != nil {
			return node{}, err
		}
		src := in[0]
		if lead { // the source in the view's shape, with the leading 1
			ne, _, _, _ := viewGeometry(into, 4)
			if src, err = c.Reshape(src, ne); err != nil {
				return node{}, err
			}
		}
		return c.Cpy(src, v)
	}); err != nil {
		return err
	}
	base.version++
	return e.Realize()
}

// mustHost wraps values known to fit shape as a host tensor.
func mustHost(v []float32, shape []int) *Tensor {
	t, _ := FromFloat32(v, shape...)
	return t
}

// Detach is t without its history: a view of the same elements (changes
// through either are seen by both) that no gradient flows through, as
// PyTorch's detach.
func (t *Tensor) Detach() *Tensor {
	off, st := t.layout()
	return keepScalar(viewOf(t, t.shape, off, st), t)
}
