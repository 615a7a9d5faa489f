package ggmlcgo

// #include "gglua_ops.h"
import "C"

import (
	"fmt"
	"math"
)

// Fused layer norm over ne0 (layer_norm.c on the CPU, gglua-kernels.cu on
// a GPU): the forward keeps each row's mean and 1/sd beside its output,
// the backward remakes x̂ from them and gives dx, dw and db at once.

// layerNormCode packs eps and which of w and b are present into the
// nodes' userdata (layer_norm.c reads it).
func layerNormCode(eps float32, w, b *Tensor) C.uint64_t {
	c := uint64(math.Float32bits(eps))
	if w != nil {
		c |= 1 << 32
	}
	if b != nil {
		c |= 1 << 33
	}
	return C.uint64_t(c)
}

func tensorOrNil(t *Tensor) *C.struct_ggml_tensor {
	if t == nil {
		return nil
	}
	return t.p
}

// LayerNorm is one node normalising each row (ne0) of the contiguous f32
// x, times w and plus b (each a contiguous f32 row of ne0, or nil): one f32
// run of y (x's elements, rows packed), then each row's mean, then its
// 1/sd. A custom op: only where Backend.HasKernel(KernelLayerNorm).
func (c *Context) LayerNorm(x Tensor, w, b *Tensor, eps float32) (Tensor, error) {
	if err := c.checkLayerNorm("layer_norm", x, w); err != nil {
		return Tensor{}, err
	}
	if err := c.checkRow("layer_norm", x, b); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_layer_norm_node(c.p, x.p, tensorOrNil(w), tensorOrNil(b), layerNormCode(eps, w, b)))
}

// LayerNormBack is the gradients of LayerNorm of x with w as given there,
// from stats, a contiguous copy of its node's statistics (each row's mean,
// then each row's 1/sd), for g, the gradient of its output (x's ne,
// contiguous): one f32 run of dx (x's elements), then dw and db (ne0 each;
// the sums of g·x̂ and of g, whether or not the forward had a weight and a
// bias: the bias does not enter the gradients).
func (c *Context) LayerNormBack(g, x, stats Tensor, w *Tensor, eps float32) (Tensor, error) {
	if err := c.checkLayerNorm("layer_norm_back", x, w); err != nil {
		return Tensor{}, err
	}
	if err := c.checkF32("layer_norm_back", g, stats); err != nil {
		return Tensor{}, err
	}
	rows := x.Nelements() / max(x.Ne()[0], 1)
	if g.Ne() != x.Ne() || !g.contiguous() || !stats.contiguous() || stats.Nelements() != 2*rows {
		return Tensor{}, fmt.Errorf("layer_norm_back: the gradient (ne %v) must be x's ne %v, contiguous, and the statistics %d elements (got %d)",
			g.Ne(), x.Ne(), 2*rows, stats.Nelements())
	}
	return result(C.gglua_layer_norm_back_node(c.p, g.p, x.p, stats.p, tensorOrNil(w), layerNormCode(eps, w, nil)))
}

func (c *Context) checkLayerNorm(op string, x Tensor, w *Tensor) error {
	if err := c.checkF32(op, x); err != nil {
		return err
	}
	if !x.contiguous() || x.Ne()[0] < 1 {
		return fmt.Errorf("%s: the kernel needs a contiguous f32 tensor with rows, got ne %v", op, x.Ne())
	}
	return c.checkRow(op, x, w)
}

// checkRow checks that p (if present) is a contiguous f32 row of x's ne0.
func (c *Context) checkRow(op string, x Tensor, p *Tensor) error {
	if p == nil {
		return nil
	}
	if err := c.checkF32(op, *p); err != nil {
		return err
	}
	if !p.contiguous() || p.Nelements() != x.Ne()[0] {
		return fmt.Errorf("%s: weight or bias of ne %v does not match x's rows of %d", op, p.Ne(), x.Ne()[0])
	}
	return nil
}
