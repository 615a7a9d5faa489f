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
