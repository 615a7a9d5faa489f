package ggmlcgo

// #include <stdlib.h>
// #include "gglua_ops.h"
// // gglua_named names a custom node after its kernel, for the op profile.
// static struct ggml_tensor * gglua_named(struct ggml_tensor * t, const char * name) {
//     ggml_set_name(t, name);
//     return t;
// }
// static struct ggml_tensor * gglua_transpose_node(struct ggml_context * ctx, struct ggml_tensor * a) {
//     struct ggml_tensor * args[1] = {a};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[1], a->ne[0], a->ne[2], a->ne[3], args, 1, gglua_transpose_f32, -1, NULL), "transpose");
// }
// static struct ggml_tensor * gglua_gelu_erf_back_node(struct ggml_context * ctx, struct ggml_tensor * g, struct ggml_tensor * x, enum ggml_type t) {
//     struct ggml_tensor * args[2] = {g, x};
//     return gglua_named(ggml_custom_4d(ctx, t, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 2, gglua_gelu_erf_back_f32, -1, NULL), "gelu_back");
// }
// static struct ggml_tensor * gglua_gelu_bf16_node(struct ggml_context * ctx, struct ggml_tensor * x) {
//     struct ggml_tensor * args[1] = {x};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_BF16, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 1, gglua_gelu_bf16_f32, -1, NULL), "gelu_bf16");
// }
// static struct ggml_tensor * gglua_relu_node(struct ggml_context * ctx, struct ggml_tensor * x) {
//     struct ggml_tensor * args[1] = {x};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 1, gglua_relu_f32, -1, NULL), "relu");
// }
// static struct ggml_tensor * gglua_relu_back_node(struct ggml_context * ctx, struct ggml_tensor * g, struct ggml_tensor * y, enum ggml_type t) {
//     struct ggml_tensor * args[2] = {g, y};
//     return gglua_named(ggml_custom_4d(ctx, t, y->ne[0], y->ne[1], y->ne[2], y->ne[3], args, 2, gglua_relu_back_f32, -1, NULL), "relu_back");
// }
// static struct ggml_tensor * gglua_col_sum_node(struct ggml_context * ctx, struct ggml_tensor * a) {
//     struct ggml_tensor * args[1] = {a};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[0], 1, 1, 1, args, 1, gglua_col_sum_f32, -1, NULL), "col_sum");
// }
// static struct ggml_tensor * gglua_bias_relu_node(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * bias, enum ggml_type t) {
//     struct ggml_tensor * args[2] = {a, bias};
//     return gglua_named(ggml_custom_4d(ctx, t, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 2, gglua_bias_relu_f32, -1, NULL), "bias_relu");
// }
// static struct ggml_tensor * gglua_adamw_node(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * g, struct ggml_tensor * m, struct ggml_tensor * v, struct ggml_tensor * p) {
//     struct ggml_tensor * args[4] = {g, m, v, p};
//     return gglua_named(ggml_custom_inplace(ctx, a, args, 4, gglua_adamw_f32, -1, NULL), "adamw");
// }
// static struct ggml_tensor * gglua_adadelta_node(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * g, struct ggml_tensor * sq, struct ggml_tensor * acc, struct ggml_tensor * p) {
//     struct ggml_tensor * args[4] = {g, sq, acc, p};
//     return gglua_named(ggml_custom_inplace(ctx, a, args, 4, gglua_adadelta_f32, -1, NULL), "adadelta");
// }
// static struct ggml_tensor * gglua_pad_node(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint64_t code) {
//     struct ggml_tensor * args[1] = {a};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3, args, 1, gglua_pad_f32, -1, (void *) (uintptr_t) code), "pad");
// }
// static struct ggml_tensor * gglua_copy_rows_node(struct ggml_context * ctx, struct ggml_tensor * a) {
//     struct ggml_tensor * args[1] = {a};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, gglua_copy_rows_f32, -1, NULL), "copy_rows");
// }
// // Flags of a bf16 gemm, {ta, tb}, and its node's names (gglua-kernels.cu
// // matches them).
// static int gglua_gemm_bf16_flags[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
// static const char * gglua_gemm_bf16_names[4] = {"gemm_bf16_nn", "gemm_bf16_nt", "gemm_bf16_tn", "gemm_bf16_tt"};
// static struct ggml_tensor * gglua_gemm_bf16_node(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * bias,
//                                                  int ta, int tb, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, enum ggml_type t) {
//     struct ggml_tensor * args[3] = {a, b, bias};
//     const int k = ta * 2 + tb;
//     return gglua_named(ggml_custom_4d(ctx, t, ne0, ne1, ne2, ne3, args, bias != NULL ? 3 : 2, gglua_gemm_bf16_f32, -1, gglua_gemm_bf16_flags[k]),
//                        gglua_gemm_bf16_names[k]);
// }
// static struct ggml_tensor * gglua_round_bf16_node(struct ggml_context * ctx, struct ggml_tensor * a) {
//     struct ggml_tensor * args[1] = {a};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_BF16, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, gglua_round_bf16_f32, -1, NULL), "to_bf16");
// }
// static struct ggml_tensor * gglua_dequantize_node(struct ggml_context * ctx, struct ggml_tensor * a) {
//     struct ggml_tensor * args[1] = {a};
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, gglua_dequantize_f32, -1, NULL), "dequantize");
// }
// // gglua_flash_probe is a bf16 flash_attn node (back: its gradient's) of
// // one head of 64 dims and 16 rows.
// static struct ggml_tensor * gglua_flash_probe(struct ggml_context * ctx, bool back) {
//     const int64_t ne[2] = {64, 16};
//     struct ggml_tensor * q = ggml_new_tensor(ctx, GGML_TYPE_F32, 2, ne);
//     const uint64_t code = (uint64_t) 0x3e000000u | (uint64_t) 3 << 32; // scale 0.125, causal, bf16
//     struct ggml_tensor * f = gglua_flash_attn_node(ctx, q, q, q, code);
//     return back ? gglua_flash_attn_back_node(ctx, q, q, q, f, q, code) : f;
// }
// // gglua_runs_kernel reports whether backend b computes gglua's kernel
// // number k (see kernelNodes) on f32 operands of one shape: the CPU always,
// // a device if its library has the kernel (scripts/cuda/gglua-kernels.cu).
// static bool gglua_runs_kernel(ggml_backend_t b, int k) {
//     struct ggml_init_params p = { 16 * ggml_tensor_overhead(), NULL, true };
//     struct ggml_context * ctx = ggml_init(p);
//     if (ctx == NULL) return false;
//     struct ggml_tensor * a[3];
//     const int64_t ne[1] = {256};
//     for (int i = 0; i < 3; i++) a[i] = ggml_new_tensor(ctx, GGML_TYPE_F32, 1, ne);
//     const int64_t ne2[2] = {16, 16}, two[1] = {2};
//     struct ggml_tensor * h = ggml_new_tensor(ctx, GGML_TYPE_BF16, 1, ne);
//     struct ggml_tensor * t = k == 0 ? gglua_relu_node(ctx, a[0]) : k == 1 ? gglua_relu_back_node(ctx, a[0], a[1], GGML_TYPE_F32) :
//         k == 2 ? gglua_gelu_erf_back_node(ctx, a[0], a[1], GGML_TYPE_F32) : k == 3 ? gglua_bias_relu_node(ctx, a[0], a[1], GGML_TYPE_F32) :
//         k == 7 ? gglua_round_bf16_node(ctx, a[0]) : k == 8 ? gglua_bias_relu_node(ctx, a[0], a[1], GGML_TYPE_BF16) :
//         k == 9 ? gglua_relu_back_node(ctx, a[0], h, GGML_TYPE_F32) : k == 10 ? gglua_relu_back_node(ctx, a[0], h, GGML_TYPE_BF16) :
//         k == 11 ? gglua_col_sum_node(ctx, ggml_new_tensor(ctx, GGML_TYPE_BF16, 2, ne2)) :
//         k == 12 ? gglua_all_reduce_node(ctx, a[0], NULL) : k == 13 ? gglua_all_reduce_join_node(ctx, a[0], NULL) :
//         k == 14 || k == 15 ? gglua_flash_probe(ctx, k == 15) :
//         k == 16 ? gglua_layer_norm_node(ctx, a[0], a[1], a[2], 0x3727c5acu | 3ull << 32) :
//         k == 17 ? gglua_layer_norm_back_node(ctx, a[0], a[1], ggml_new_tensor(ctx, GGML_TYPE_F32, 1, two), a[2], 0x3727c5acu | 1ull << 32) :
//         k == 18 || k == 19 ? gglua_gemm_bf16_node(ctx, ggml_new_tensor(ctx, GGML_TYPE_F32, 2, ne2), ggml_new_tensor(ctx, GGML_TYPE_F32, 2, ne2), ggml_new_tensor(ctx, GGML_TYPE_F32, 1, ne2), 0, 1, 16, 16, 1, 1, k == 18 ? GGML_TYPE_F32 : GGML_TYPE_BF16) :
//         k == 20 ? gglua_gelu_bf16_node(ctx, h) : k == 21 ? gglua_gelu_erf_back_node(ctx, a[0], h, GGML_TYPE_BF16) :
//         k == 22 ? gglua_dequantize_node(ctx, ggml_new_tensor(ctx, GGML_TYPE_Q4_K, 1, ne)) :
//         gglua_gemm_bf16_node(ctx, ggml_new_tensor(ctx, GGML_TYPE_F32, 2, ne2), ggml_new_tensor(ctx, GGML_TYPE_BF16, 2, ne2), NULL, k == 5, k == 6, 16, 16, 1, 1, GGML_TYPE_F32);
//     bool ok = ggml_backend_supports_op(b, t);
//     ggml_free(ctx);
//     return ok;
// }
// static struct ggml_tensor * gglua_values_node(struct ggml_context * ctx, int64_t n, float * vals) {
//     return gglua_named(ggml_custom_4d(ctx, GGML_TYPE_F32, n, 1, 1, 1, NULL, 0, gglua_fill_values, 1, vals), "values");
// }
import "C"

import (
	"fmt"
	"unsafe"
)

// Kernel names a set of gglua's kernels that a device runs only if its
// library was built with them (scripts/build-cuda.sh builds ggml-cuda so).
type Kernel int

const (
	KernelRelu          Kernel = iota // ReluKernel and ReluBackKernel
	KernelGeluBack                    // GeluErfBackKernel
	KernelBiasRelu                    // BiasReluKernel, and ReluBackKernel for its gradient
	KernelGemmBF16                    // GemmBF16 (the three transposes a product and its gradients use) and RoundBF16Kernel
	KernelBiasReluBF16                // BiasReluKernel to bf16, ReluBackKernel of a bf16 result (to f32 or bf16), ColumnSumKernel of bf16
	KernelAllReduce                   // AllReduce and AllReduceJoin (collective.go)
	KernelFlashAttnBF16               // FlashAttention and FlashAttentionBack with BF16 set (attention.go)
	KernelLayerNorm                   // LayerNorm and LayerNormBack (layer_norm.go)
	KernelGemmBF16Bias                // GemmBF16Bias: the product and a bias in one pass (cuBLASLt's epilogue)
	KernelMLPBF16                     // GemmBF16Bias into bf16, GeluBF16Kernel, GeluErfBackKernel of bf16 into bf16 (core's MLP)
	KernelDequantize                  // DequantizeKernel of every quantized type (quantized.go in core)
)

// kernelNodes are the custom nodes each Kernel needs, numbered as
// gglua_runs_kernel numbers them.
var kernelNodes = [...][]C.int{KernelRelu: {0, 1}, KernelGeluBack: {2}, KernelBiasRelu: {3, 1}, KernelGemmBF16: {4, 5, 6, 7}, KernelBiasReluBF16: {8, 9, 10, 11}, KernelAllReduce: {12, 13}, KernelFlashAttnBF16: {14, 15}, KernelLayerNorm: {16, 17}, KernelGemmBF16Bias: {18}, KernelMLPBF16: {19, 20, 21}, KernelDequantize: {22}}

// HasKernel reports whether b computes the kernels k: the CPU always; a
// device when its library has them (a ggml-cuda built elsewhere does not:
// gglua then composes ggml's own ops). Asked of the library once.
func (b *Backend) HasKernel(k Kernel) bool {
	if k < 0 || int(k) >= len(kernelNodes) {
		return false
	}
	if b.cpu {
		return true
	}
	b.kernelsOnce.Do(func() { b.kernels = b.probeKernels() })
	return b.kernels[k]
}

// probeKernels asks b's library which kernel sets it computes (none, for
// a closed backend).
func (b *Backend) probeKernels() (has [len(kernelNodes)]bool) {
	if b.p == nil {
		return has
	}
	for i, nodes := range kernelNodes {
		has[i] = true
		for _, n := range nodes {
			has[i] = has[i] && bool(C.gglua_runs_kernel(b.p, n))
		}
	}
	return has
}

// IsContiguous reports whether t's elements are packed in order.
func (t Tensor) IsContiguous() bool { return t.contiguous() }

// contiguous reports whether t's elements are packed in order.
func (t Tensor) contiguous() bool {
	nb, ne := t.p.nb, t.Ne()
	return int64(nb[0]) == t.Type().TypeBytes() && int64(nb[1]) == int64(nb[0])*(ne[0]/t.Type().BlockSize()) &&
		int64(nb[2]) == int64(nb[1])*ne[1] && int64(nb[3]) == int64(nb[2])*ne[2]
}

// TransposeCPU swaps ne0 and ne1 of a contiguous f32 tensor with gglua's
// blocked kernel (transpose.c): several times faster than Transpose on the
// CPU, but a custom op, which only the CPU backend runs.
func (c *Context) TransposeCPU(a Tensor) (Tensor, error) {
	if err := c.checkF32("transpose", a); err != nil {
		return Tensor{}, err
	}
	if !a.contiguous() {
		return Tensor{}, fmt.Errorf("transpose: the fast kernel needs a contiguous tensor")
	}
	return result(C.gglua_transpose_node(c.p, a.p))
}

// GeluErfBackKernel is g·gelu'(x) for gelu's erf form (Φ(x) + x φ(x),
// Φ from erf as in PyTorch: the forward's result is not read), one node of
// gglua's kernel (gelu.c; on a device gglua-kernels.cu); g and x are
// contiguous tensors of one shape, g f32, x f32 or bf16 (a product's
// result under autocast), the result f32 or bf16 (rounded: a gradient that
// a product rounds anyway), as out says. A custom op: only where
// Backend.HasKernel(KernelGeluBack), and KernelMLPBF16 for bf16.
func (c *Context) GeluErfBackKernel(g, x Tensor, out Type) (Tensor, error) {
	if err := c.checkF32("gelu_back", g); err != nil {
		return Tensor{}, err
	}
	if err := c.checkOp("gelu_back", x); err != nil {
		return Tensor{}, err
	}
	if x.Type() != F32 && x.Type() != BF16 || out != F32 && out != BF16 {
		return Tensor{}, fmt.Errorf("gelu_back: GELU's input and the gradient must be f32 or bf16, got %s and %s", x.Type(), out)
	}
	if !sameShape(g, x) || !g.contiguous() || !x.contiguous() {
		return Tensor{}, fmt.Errorf("gelu_back: the kernel needs contiguous operands of one shape, got ne %v and %v", g.Ne(), x.Ne())
	}
	return result(C.gglua_gelu_erf_back_node(c.p, g.p, x.p, C.enum_ggml_type(out)))
}

// GeluBF16Kernel is GELU (erf form, PyTorch's exact one) of x, a
// contiguous f32 or bf16 tensor, rounded to bf16: one node of gglua's
// kernel (gelu.c; on a device gglua-kernels.cu), for the operand of a
// product under autocast. A custom op: only where
// Backend.HasKernel(KernelMLPBF16).
func (c *Context) GeluBF16Kernel(x Tensor) (Tensor, error) {
	if err := c.checkOp("gelu_bf16", x); err != nil {
		return Tensor{}, err
	}
	if x.Type() != F32 && x.Type() != BF16 || !x.contiguous() {
		return Tensor{}, fmt.Errorf("gelu_bf16: the kernel needs a contiguous f32 or bf16 operand, got %s ne %v", x.Type(), x.Ne())
	}
	return result(C.gglua_gelu_bf16_node(c.p, x.p))
}

// ReluKernel is max(x, 0) with NaN kept (PyTorch's relu), and
// ReluBackKernel its gradient from the result y: g where y > 0 or is NaN
// and 0 elsewhere (selected, not multiplied: an infinite g at a negative x
// gives 0), as PyTorch's threshold_backward of the result; one node of
// gglua's kernels (relu.c; on a device gglua-kernels.cu) each; contiguous
// f32 operands of one shape. Custom ops: only where
// Backend.HasKernel(KernelRelu).
func (c *Context) ReluKernel(x Tensor) (Tensor, error) {
	if err := c.checkPackedF32("relu", x); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_relu_node(c.p, x.p))
}

// checkPackedF32 is checkF32 for a kernel of one operand that also needs
// it packed.
func (c *Context) checkPackedF32(op string, a Tensor) error {
	if err := c.checkF32(op, a); err != nil {
		return err
	}
	if !a.contiguous() {
		return fmt.Errorf("%s: the kernel needs a contiguous operand, got ne %v", op, a.Ne())
	}
	return nil
}

// ReluBackKernel: see ReluKernel. y may be bf16 (a BiasReluKernel result
// rounded for a product: where relu is 0 or NaN rounding keeps it so), and
// the result bf16 (rounded: a gradient that a product rounds anyway) or
// f32, as out says.
func (c *Context) ReluBackKernel(g, y Tensor, out Type) (Tensor, error) {
	if err := c.checkF32("relu_back", g); err != nil {
		return Tensor{}, err
	}
	if err := c.checkOp("relu_back", y); err != nil {
		return Tensor{}, err
	}
	if y.Type() != F32 && y.Type() != BF16 || out != F32 && out != BF16 || out == BF16 && y.Type() != BF16 {
		return Tensor{}, fmt.Errorf("relu_back: relu's result and the gradient must be f32 or bf16 (a bf16 gradient from a bf16 result), got %s and %s", y.Type(), out)
	}
	if !sameShape(g, y) || !g.contiguous() || !y.contiguous() {
		return Tensor{}, fmt.Errorf("relu_back: the kernel needs contiguous operands of one shape, got ne %v and %v", g.Ne(), y.Ne())
	}
	return result(C.gglua_relu_back_node(c.p, g.p, y.p, C.enum_ggml_type(out)))
}

// BiasReluKernel is relu(a + bias) as one node of gglua's kernel (relu.c;
// on a device gglua-kernels.cu), NaN kept, for a contiguous f32 tensor a
// and bias a contiguous f32 row of a's ne0, added to every row (a linear
// layer's bias); the result in type out, f32, or bf16 (the f32 result
// rounded). A custom op: only where Backend.HasKernel(KernelBiasRelu), and
// KernelBiasReluBF16 for bf16.
func (c *Context) BiasReluKernel(a, bias Tensor, out Type) (Tensor, error) {
	if err := c.checkF32("bias_relu", a, bias); err != nil {
		return Tensor{}, err
	}
	if out != F32 && out != BF16 {
		return Tensor{}, fmt.Errorf("bias_relu: the result must be f32 or bf16, not %s", out)
	}
	if !a.contiguous() || !bias.contiguous() || bias.Ne()[0] != a.Ne()[0] || bias.Nelements() != bias.Ne()[0] {
		return Tensor{}, fmt.Errorf("bias_relu: the kernel needs a contiguous operand and a contiguous row of its ne0, got ne %v and %v", a.Ne(), bias.Ne())
	}
	return result(C.gglua_bias_relu_node(c.p, a.p, bias.p, C.enum_ggml_type(out)))
}

// GemmBF16 is op(a)·op(b) from operands rounded to bf16, summed in f32
// (autocast's products), as one node of gglua's kernel (bf16.c; on a
// device gglua-kernels.cu, cuBLAS reading the transposes in place, so a
// gradient's product needs no transposed copies and its result no
// conversion). a and b are contiguous, f32 (rounded inside) or bf16, seen
// as Gemm sees them: op(a) [M, K], op(b) [K, N], every dim past ne0 a row;
// the result is f32 with ne out (rows multiplying to M, ne0 N). A custom
// op: only where Backend.HasKernel(KernelGemmBF16); the CPU's is the
// reference form (slow: autocast's products there are ggml's mul_mat).
func (c *Context) GemmBF16(a, b Tensor, ta, tb bool, out [MaxDims]int64) (Tensor, error) {
	return c.gemmBF16(a, b, nil, ta, tb, out, F32)
}

// GemmBF16Bias is GemmBF16 plus bias, a contiguous f32 row of N, added
// in f32 to every row of the sums before they are written (a Linear
// layer's bias, as cuBLASLt's bias epilogue adds it: no pass of its own),
// as typ: f32, or bf16 (the sums rounded once, as PyTorch's autocast
// writes a product). Only where Backend.HasKernel(KernelGemmBF16Bias),
// and KernelMLPBF16 for bf16.
func (c *Context) GemmBF16Bias(a, b, bias Tensor, ta, tb bool, out [MaxDims]int64, typ Type) (Tensor, error) {
	return c.gemmBF16(a, b, &bias, ta, tb, out, typ)
}

func (c *Context) gemmBF16(a, b Tensor, bias *Tensor, ta, tb bool, out [MaxDims]int64, typ Type) (Tensor, error) {
	if typ != F32 && typ != BF16 {
		return Tensor{}, fmt.Errorf("gemm_bf16: the result must be f32 or bf16, not %s", typ)
	}
	operands := []Tensor{a, b}
	if bias != nil {
		operands = append(operands, *bias)
	}
	if err := c.checkOp("gemm_bf16", operands...); err != nil {
		return Tensor{}, err
	}
	for _, t := range []Tensor{a, b} {
		if t.Type() != F32 && t.Type() != BF16 || !t.contiguous() {
			return Tensor{}, fmt.Errorf("gemm_bf16: needs contiguous f32 or bf16 operands, got %s ne %v (contiguous: %v)", t.Type(), t.Ne(), t.contiguous())
		}
	}
	matrix := func(t Tensor, trans bool) (rows, cols int64) {
		ne := t.Ne()
		if trans {
			return ne[0], ne[1] * ne[2] * ne[3]
		}
		return ne[1] * ne[2] * ne[3], ne[0]
	}
	m, k := matrix(a, ta)
	kb, n := matrix(b, tb)
	if k != kb || out[0] != n || out[1]*out[2]*out[3] != m || m > 1<<30 || n > 1<<30 || k > 1<<30 {
		return Tensor{}, fmt.Errorf("gemm_bf16: cannot multiply ne %v by ne %v (transposed %v, %v) into ne %v", a.Ne(), b.Ne(), ta, tb, out)
	}
	var bp *C.struct_ggml_tensor
	if bias != nil {
		if bias.Type() != F32 || !bias.contiguous() || bias.Nelements() != n {
			return Tensor{}, fmt.Errorf("gemm_bf16: the bias must be a contiguous f32 row of %d, got %s ne %v", n, bias.Type(), bias.Ne())
		}
		bp = bias.p
	}
	return result(C.gglua_gemm_bf16_node(c.p, a.p, b.p, bp, cbool(ta), cbool(tb), C.int64_t(out[0]), C.int64_t(out[1]), C.int64_t(out[2]), C.int64_t(out[3]), C.enum_ggml_type(typ)))
}

// cbool is b as C's int flag.
func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// DequantizeKernel is the contiguous quantized tensor a in f32, one node
// of gglua's kernel (dequantize.c; on a device gglua-kernels.cu, with
// ggml-cuda's converters, which take the K-quants its copy does not). A
// custom op: only where Backend.HasKernel(KernelDequantize).
func (c *Context) DequantizeKernel(a Tensor) (Tensor, error) {
	if !a.Type().Quantized() || !a.contiguous() {
		return Tensor{}, fmt.Errorf("dequantize: expected a contiguous tensor of a quantized type, got %v", a.Type())
	}
	return result(C.gglua_dequantize_node(c.p, a.p))
}

// RoundBF16Kernel is the contiguous f32 tensor a rounded to bf16 (to
// nearest, ties to even, as Cast rounds), one node of gglua's kernel
// (bf16.c; on a device gglua-kernels.cu, at the memory's bandwidth
// where ggml's copy reaches a third of it). A custom op: only where
// Backend.HasKernel(KernelGemmBF16).
func (c *Context) RoundBF16Kernel(a Tensor) (Tensor, error) {
	if err := c.checkPackedF32("to_bf16", a); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_round_bf16_node(c.p, a.p))
}

// ColumnSumKernel is the sums over the rows of the contiguous f32 or bf16
// tensor a (every dim past ne0 a row), an f32 row of a's ne0, as one node
// of gglua's kernel (bf16.c; on a device gglua-kernels.cu): a bias's
// gradient from a bf16 gradient, which ggml's sums do not read. A custom
// op: only where Backend.HasKernel(KernelBiasReluBF16).
func (c *Context) ColumnSumKernel(a Tensor) (Tensor, error) {
	if err := c.checkOp("col_sum", a); err != nil {
		return Tensor{}, err
	}
	if a.Type() != F32 && a.Type() != BF16 || !a.contiguous() {
		return Tensor{}, fmt.Errorf("col_sum: the kernel needs a contiguous f32 or bf16 operand, got %s ne %v", a.Type(), a.Ne())
	}
	return result(C.gglua_col_sum_node(c.p, a.p))
}

// AdamWCPU is OptStepAdamW as gglua's kernel (adamw.c): the same update,
// vectorised; a, grad, m and v contiguous f32 of one shape, params the 7
// numbers. The result is a view of a. A custom op: the CPU backend only.
func (c *Context) AdamWCPU(a, grad, m, v, params Tensor) (Tensor, error) {
	if err := c.checkStep("adamw", 7, a, grad, m, v, params); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_adamw_node(c.p, a.p, grad.p, m.p, v.p, params.p))
}

// AdadeltaCPU is Adadelta's step as gglua's kernel (adadelta.c), in place
// of a: grad, square_avg and acc_delta (both updated) contiguous f32 of a's
// shape, params the 5 numbers rho, 1 - rho, eps, weight_decay and -lr. The
// result is a view of a. A custom op: the CPU backend only.
func (c *Context) AdadeltaCPU(a, grad, sq, acc, params Tensor) (Tensor, error) {
	if err := c.checkStep("adadelta", 5, a, grad, sq, acc, params); err != nil {
		return Tensor{}, err
	}
	return result(C.gglua_adadelta_node(c.p, a.p, grad.p, sq.p, acc.p, params.p))
}

// checkStep checks an optimizer kernel's operands: the parameter a, its
// gradient and two state tensors contiguous f32 of one shape, and n params.
func (c *Context) checkStep(name string, n int64, a, grad, s1, s2, params Tensor) error {
	if err := c.checkF32(name, a, grad, s1, s2, params); err != nil {
		return err
	}
	if !sameShape(a, grad) || !sameShape(a, s1) || !sameShape(a, s2) || params.Nelements() != n ||
		!a.contiguous() || !grad.contiguous() || !s1.contiguous() || !s2.contiguous() || !params.contiguous() {
		return fmt.Errorf("%s: the kernel needs contiguous operands of one shape and %d params, got ne %v, %v, %v, %v and %d params", name, n, a.Ne(), grad.Ne(), s1.Ne(), s2.Ne(), params.Nelements())
	}
	return nil
}

// PadCPU is the contiguous f32 tensor a with before zeros ahead of it and
// after zeros behind it along dim (ne order), one node of gglua's kernel
// (rows.c): ggml's pad, whose CPU loop visits elements with the outermost
// dim innermost, took a tenth of a small GPT's step. A custom op: the CPU
// backend only.
func (c *Context) PadCPU(a Tensor, dim, before, after int) (Tensor, error) {
	if err := c.checkF32("pad", a); err != nil {
		return Tensor{}, err
	}
	ne := a.Ne()
	if dim < 0 || dim >= MaxDims || before < 0 || after < 0 || before > 1<<30 || after > 1<<30 || !a.contiguous() {
		return Tensor{}, fmt.Errorf("pad: cannot pad ne %v along dim %d by %d and %d (contiguous: %v)", ne, dim, before, after, a.contiguous())
	}
	ne[dim] += int64(before + after)
	if ne[0]*ne[1] > 1<<40 || ne[0]*ne[1]*ne[2]*ne[3] > 1<<40 {
		return Tensor{}, fmt.Errorf("pad: ne %v is too large", ne)
	}
	code := uint64(dim)<<40 | uint64(before)
	return result(C.gglua_pad_node(c.p, a.p, C.int64_t(ne[0]), C.int64_t(ne[1]), C.int64_t(ne[2]), C.int64_t(ne[3]), C.uint64_t(code)))
}

// ContRowsCPU is Cont for an f32 view whose rows (ne0) are contiguous, one
// node of gglua's kernel (rows.c): a memcpy per row, where ggml's copy of
// such a view goes element by element. A custom op: the CPU backend only.
func (c *Context) ContRowsCPU(a Tensor) (Tensor, error) {
	if err := c.checkF32("cont", a); err != nil {
		return Tensor{}, err
	}
	if !a.contiguousRows() {
		return Tensor{}, fmt.Errorf("cont: the row kernel needs contiguous rows, got strides %v", a.p.nb)
	}
	return result(C.gglua_copy_rows_node(c.p, a.p))
}

// Values is a CPU-only node holding vals. The numbers live in C memory that
// the returned free function releases, which must wait until every graph
// with the node has been computed.
func (c *Context) Values(vals []float32) (Tensor, func(), error) {
	if err := c.checkOp("values"); err != nil {
		return Tensor{}, nil, err
	}
	if len(vals) == 0 || len(vals) > 1<<20 {
		return Tensor{}, nil, fmt.Errorf("values: %d numbers", len(vals))
	}
	mem := (*C.float)(C.malloc(C.size_t(4 * len(vals))))
	if mem == nil {
		return Tensor{}, nil, fmt.Errorf("values: out of host memory")
	}
	copy(unsafe.Slice((*float32)(unsafe.Pointer(mem)), len(vals)), vals)
	t := C.gglua_values_node(c.p, C.int64_t(len(vals)), mem)
	return Tensor{p: t}, func() { C.free(unsafe.Pointer(mem)) }, nil
}
