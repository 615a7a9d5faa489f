package ggmlcgo

// #include "gglua_ggml.h"
import "C"

import "fmt"

// RopeOptions are a rotary position embedding's constants (ggml_rope_ext's,
// as llama.cpp passes them for a llama model).
type RopeOptions struct {
	Dims int  // the leading dims of each head that rotate (even, at most its width)
	NeoX bool // rotate dims i and i + Dims/2 together (GPT-NeoX) rather than 2i and 2i + 1 (llama)
	// Base is the frequencies' base (rope.freq_base: 10000 for llama);
	// Scale multiplies positions (1/rope.scaling.factor for linear scaling).
	Base, Scale float32
}

func (o RopeOptions) mode() C.int {
	if o.NeoX {
		return 2 // GGML_ROPE_TYPE_NEOX
	}
	return 0 // GGML_ROPE_TYPE_NORMAL
}

// Rope rotates a, ne (width, heads, positions, batch) f32, by the i32
// vector pos of one position a row of ne2 (ggml_rope_ext without YaRN's
// extension: ext_factor 0, attn_factor 1).
func (c *Context) Rope(a, pos Tensor, o RopeOptions) (Tensor, error) {
	if err := c.checkRope("rope", a, pos, o); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_rope_ext(c.p, a.p, pos.p, nil, C.int(o.Dims), o.mode(), 0, C.float(o.Base), C.float(o.Scale), 0, 1, 32, 1))
}

// RopeBack is Rope's gradient for g, the gradient of its result: the
// rotation back by the same angles.
func (c *Context) RopeBack(g, pos Tensor, o RopeOptions) (Tensor, error) {
	if err := c.checkRope("rope_back", g, pos, o); err != nil {
		return Tensor{}, err
	}
	return result(C.ggml_rope_ext_back(c.p, g.p, pos.p, nil, C.int(o.Dims), o.mode(), 0, C.float(o.Base), C.float(o.Scale), 0, 1, 32, 1))
}

// checkRope refuses what ggml's rope asserts on.
func (c *Context) checkRope(op string, a, pos Tensor, o RopeOptions) error {
	if err := c.checkF32(op, a); err != nil {
		return err
	}
	if err := c.checkOp(op, pos); err != nil {
		return err
	}
	ne, np := a.Ne(), pos.Ne()
	if pos.Type() != I32 || np[1] != 1 || np[2] != 1 || np[3] != 1 || np[0] != ne[2] {
		return fmt.Errorf("%s: the positions must be an i32 vector of ne2 = %d of ne %v, got %v ne %v", op, ne[2], ne, pos.Type(), np)
	}
	if o.Dims < 2 || o.Dims%2 != 0 || int64(o.Dims) > ne[0] {
		return fmt.Errorf("%s: %d rotated dims for rows of %d (an even number, at most the row)", op, o.Dims, ne[0])
	}
	if !a.contiguousRows() {
		return fmt.Errorf("%s: the rows of ne %v must be packed", op, ne)
	}
	return nil
}
