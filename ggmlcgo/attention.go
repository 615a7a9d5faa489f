package ggmlcgo

// #include "gglua_ops.h"
import "C"

import (
	"fmt"
	"math"
)

// Fused attention (flash_attn.c on the CPU, scripts/cuda/gglua-flash-attn.cu
// on a GPU): softmax(q·kᵀ·scale, causal) · v and its gradient, never
// holding the [Tq, Tk] scores.

// FlashOptions are a fused attention's constants.
type FlashOptions struct {
	Scale  float32
	Causal bool // query i attends to keys 0..i (top-left aligned, PyTorch's is_causal)
	// BF16 rounds what a GPU's tensor cores read to bf16 (autocast); a
	// device runs only this form (KernelFlashAttnBF16), the CPU both.
	BF16 bool
}

// code packs o into the nodes' userdata (flash_attn.c reads it).
func (o FlashOptions) code() C.uint64_t {
	c := uint64(math.Float32bits(o.Scale))
	if o.Causal {
		c |= 1 << 32
	}
	if o.BF16 {
		c |= 1 << 33
	}
	return C.uint64_t(c)
}

// FlashMaxHeadDim is the widest head the CPU kernel takes; a GPU's takes
// the dims FlashDeviceHeadDim allows.
const FlashMaxHeadDim = 128

// FlashDeviceHeadDim reports whether a GPU's kernel takes heads of d dims.
func FlashDeviceHeadDim(d int) bool { return d == 16 || d == 32 || d == 64 || d == 128 }

// FlashRun is the element count of a forward node's one run for q of n
// elements in rows of its head width: the output as [B][Tq][H][D] from
// element 0, then the log-sum-exp of the scaled scores as [B][H][Tq] f32.
// The run is f32, or bf16 in the BF16 form (FlashRunType: the output in
// bf16, as PyTorch's autocast writes attention's; each f32 of the
// log-sum-exp takes two elements).
func FlashRun(n, rows int64, o FlashOptions) int64 {
	if o.BF16 {
		return n + 2*rows
	}
	return n + rows
}

// FlashRunType is the type of a forward node's run (FlashRun).
func FlashRunType(o FlashOptions) Type {
	if o.BF16 {
		return BF16
	}
	return F32
}

// FlashAttention is one node computing attention for q with ne (D, Tq, H,
// B) and k, v with ne (D, Tk, H, B): f32, or all three bf16 in the BF16
// form (a product's result under autocast), rows packed, any other
// strides (heads read in place from a projection); FlashRun says where
// its results lie.
func (c *Context) FlashAttention(q, k, v Tensor, o FlashOptions) (Tensor, error) {
	if err := c.checkOp("flash_attn", q, k, v); err != nil {
		return Tensor{}, err
	}
	if err := checkFlash("flash_attn", q, k, v, o); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_flash_attn_node(c.p, q.p, k.p, v.p, o.code()))
}

// FlashAttentionBack is the gradients of FlashAttention's fwd (its node,
// as computed) for the gradient g of its output (q's ne, rows packed):
// one f32 run of dq [B][Tq][H][D], then dk and dv, each [B][Tk][H][D].
func (c *Context) FlashAttentionBack(q, k, v, fwd, g Tensor, o FlashOptions) (Tensor, error) {
	if err := c.checkOp("flash_attn_back", q, k, v); err != nil {
		return Tensor{}, err
	}
	if err := checkFlash("flash_attn_back", q, k, v, o); err != nil {
		return Tensor{}, err
	}
	if err := c.checkF32("flash_attn_back", g); err != nil {
		return Tensor{}, err
	}
	qn := q.Ne()
	n := FlashRun(qn[0]*qn[1]*qn[2]*qn[3], qn[1]*qn[2]*qn[3], o)
	if !sameShape(g, q) || !g.contiguousRows() || !fwd.contiguous() || fwd.Nelements() != n || fwd.Type() != FlashRunType(o) {
		return Tensor{}, fmt.Errorf("flash_attn_back: the output's gradient (ne %v) must have q's ne %v with packed rows, and the forward %d elements of %s (got %d of %s)",
			g.Ne(), q.Ne(), n, FlashRunType(o), fwd.Nelements(), fwd.Type())
	}
	return result(C.gglua_flash_attn_back_node(c.p, q.p, k.p, v.p, fwd.p, g.p, o.code()))
}

// checkFlash validates the fused attention's operands before ggml sees
// them (its kernels trust the shapes and types).
func checkFlash(op string, q, k, v Tensor, o FlashOptions) error {
	for _, t := range []Tensor{q, k, v} {
		if t.Type() != q.Type() || t.Type() != F32 && !(t.Type() == BF16 && o.BF16) {
			return fmt.Errorf("%s: q, k and v must be f32, or all bf16 in the bf16 form, got %s, %s and %s", op, q.Type(), k.Type(), v.Type())
		}
	}
	qn, kn, vn := q.Ne(), k.Ne(), v.Ne()
	if qn[0] < 1 || qn[0] > FlashMaxHeadDim || qn[1] < 1 || kn[1] < 1 || kn != vn || kn[0] != qn[0] || kn[2] != qn[2] || kn[3] != qn[3] {
		return fmt.Errorf("%s: shapes q ne %v, k ne %v, v ne %v do not fit (ne (D, T, H, B), D at most %d, one head dim for all)", op, qn, kn, vn, FlashMaxHeadDim)
	}
	for _, t := range []Tensor{q, k, v} {
		if !t.contiguousRows() {
			return fmt.Errorf("%s: the kernel needs packed rows, got ne %v with strides %v", op, t.Ne(), t.p.nb)
		}
	}
	if qn[1]*qn[2]*qn[3] > 1<<40/qn[0] || kn[1]*kn[2]*kn[3] > 1<<40/kn[0] {
		return fmt.Errorf("%s: q ne %v and k ne %v are too large", op, qn, kn)
	}
	return nil
}
