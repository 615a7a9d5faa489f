package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import "fmt"

// The op builders check what ggml would assert on, then add one node to c.

func (c *Context) checkOp(op string, ts ...Tensor) error {
	if c == nil || c.p == nil {
		return fmt.Errorf("%s: context used after free", op)
	}
	for _, t := range ts {
		if t.p == nil {
			return fmt.Errorf("%s: %w", op, errNilOperand)
		}
	}
	if c.Room() < 1 {
		return fmt.Errorf("%s: context has no room for another node", op)
	}
	return nil
}

// canRepeat is ggml_can_repeat: every dim of b divides the same dim of a.
func canRepeat(b, a Tensor) bool {
	nb, na := b.Ne(), a.Ne()
	for i := range na {
		if na[i]%nb[i] != 0 {
			return false
		}
	}
	return true
}

// Add is a + b, where b is repeated (broadcast) along every dim it divides.
func (c *Context) Add(a, b Tensor) (Tensor, error) {
	if err := c.checkOp("add", a, b); err != nil {
		return Tensor{}, err
	}
	if a.Type() != F32 && a.Type() != F16 && a.Type() != BF16 || !canRepeat(b, a) {
		return Tensor{}, fmt.Errorf("add: cannot broadcast %v (%v) into %v (%v)", b.Ne(), b.Type(), a.Ne(), a.Type())
	}
	return Tensor{p: C.ggml_add(c.p, a.p, b.p)}, nil
}

// MulMat is ggml_mul_mat: for a of ne (k, m) and b of ne (k, n) the result has
// ne (m, n), i.e. b times the transpose of a; batch dims of a broadcast over b.
func (c *Context) MulMat(a, b Tensor) (Tensor, error) {
	if err := c.checkOp("mul_mat", a, b); err != nil {
		return Tensor{}, err
	}
	na, nb := a.Ne(), b.Ne()
	if na[0] != nb[0] || nb[2]%na[2] != 0 || nb[3]%na[3] != 0 || b.Type() != F32 {
		return Tensor{}, fmt.Errorf("mul_mat: incompatible ne %v (%v) and %v (%v)", na, a.Type(), nb, b.Type())
	}
	return Tensor{p: C.ggml_mul_mat(c.p, a.p, b.p)}, nil
}
