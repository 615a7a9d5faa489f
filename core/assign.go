package core

import (
	"errors"
	"fmt"

	"github.com/gglua/gglua/ggmlcgo"
)

// Assign gives dst the value of src in place (copy_; add_, fill_ and
// zero_ are built on it). It refuses what would corrupt the tape: a tensor
// computed by a recorded op, and a parameter while a tape is recording.
func (e *Engine) Assign(dst, src *Tensor) error {
	if dst.storage().dtype == ggmlcgo.I32 {
		return argErrorf("copy_: an i32 tensor (indices, labels) is not changed in place; build a new one")
	}
	if !sameShape(dst.shape, src.shape) {
		return shapeErrorf("copy_: source shape %s differs from destination shape %s", ShapeString(src.shape), ShapeString(dst.shape))
	}
	if dst.gradFn != nil {
		return fmt.Errorf("copy_: in-place change of a tensor the tape needs (it was computed by %s); use an out-of-place op", dst.gradFn.name)
	}
	if dst.base != nil {
		return e.assignView(dst, src) // through a view into its base
	}
	if dst.requiresGrad && e.recording() {
		return errors.New("copy_: in-place change of a parameter inside with_grad_tape; do it outside the tape or inside no_grad")
	}
	if err := e.checkWrittenGrad(src); err != nil {
		return err
	}
	switch {
	case dst.host != nil:
		v, err := src.Float32s()
		if err != nil {
			return err
		}
		copy(dst.host, v)
		dst.version++
		return nil
	case dst.handle != nil:
		return e.writeInPlace(dst, src)
	case dst.pending:
		if dst.engine != e {
			return errors.New("copy_: tensor belongs to another runtime")
		}
		s, err := e.input(src)
		if err != nil {
			return err
		}
		c, err := e.nodeContext()
		if err != nil {
			return err
		}
		n, err := c.Scale(s, 1) // a node of its own holding src's value
		if err != nil {
			return err
		}
		dst.node = n
		dst.version++
		return nil
	}
	return errDropped
}

// checkWrittenGrad refuses, under a tape, a value that requires grad:
// PyTorch would make the destination part of the graph, but gglua's
// in-place writes carry no gradient, which would be lost.
func (e *Engine) checkWrittenGrad(src *Tensor) error {
	if src.requiresGrad && e.recording() {
		return argErrorf("copy_: the value written requires grad, and an in-place write does not carry gradients here; use the out-of-place result (x:masked_scatter, where, cat) or write it inside no_grad")
	}
	return nil
}

// WriteRows writes src's rows into dst's rows start.. in place, as part
// of the pending work (ggml's set_rows): a key/value cache's update, which
// later ops read in the same graph with no compute in between. dst is a
// placed f32 tensor outside any tape; src has dst's shape but for its
// first dim.
func (e *Engine) WriteRows(dst *Tensor, start int, src *Tensor) error {
	if dst.handle == nil || dst.base != nil || dst.engine != e || dst.storage().dtype != ggmlcgo.F32 {
		return argErrorf("write_rows: the destination must be a placed f32 tensor of this device (not a view)")
	}
	if dst.requiresGrad && e.recording() {
		return errors.New("write_rows: in-place change of a parameter inside with_grad_tape")
	}
	if len(src.shape) != len(dst.shape) || !sameShape(src.shape[1:], dst.shape[1:]) || start < 0 || start > dst.shape[0]-src.shape[0] {
		return shapeErrorf("write_rows: rows %d.. of shape %s cannot take shape %s", start+1, ShapeString(dst.shape), ShapeString(src.shape))
	}
	rows := make([]int, src.shape[0])
	for i := range rows {
		rows[i] = start + i
	}
	idx, err := e.uploadInts(rows)
	if err != nil {
		return err
	}
	width := int(dst.Numel()) / dst.shape[0]
	return e.inPlace(dst, []*Tensor{src, idx}, func(c ctx, base node, in []node) (node, error) {
		b, err := c.ReshapeView(base, ne4([]int{dst.shape[0], width}))
		if err != nil {
			return node{}, err
		}
		s, err := e.packed(c, in[0])
		if err == nil {
			s, err = c.ReshapeView(s, ne4([]int{src.shape[0], width}))
		}
		if err != nil {
			return node{}, err
		}
		w, err := c.SetRows(b, s, in[1])
		if err != nil {
			return node{}, err
		}
		return c.ReshapeView(w, ne4(dst.shape))
	})
}
