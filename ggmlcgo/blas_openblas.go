//go:build openblas

package ggmlcgo

// #cgo LDFLAGS: -lopenblas
// #include <cblas.h>
// #include "gglua_ops.h"
//
// void openblas_set_num_threads(int);
//
// // Flags of a gemm: which operand is used transposed.
// typedef struct { int ta, tb; } gglua_gemm_flags;
// static gglua_gemm_flags gglua_gemm_kinds[4] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
//
// // dst [M, N] = op(a) [M, K] · op(b) [K, N], shapes outermost first, all
// // f32 and contiguous; rows of dst are split over the ggml threads, each
// // running single-threaded OpenBLAS.
// static void gglua_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
//     const gglua_gemm_flags * f = (const gglua_gemm_flags *) userdata;
//     const struct ggml_tensor * a = dst->src[0];
//     const struct ggml_tensor * b = dst->src[1];
//     // Every dim past ne0 counts as rows: [B, m, k] is a [B*m, k] matrix.
//     const int M = (int) (dst->ne[1] * dst->ne[2] * dst->ne[3]), N = (int) dst->ne[0];
//     const int K = f->ta ? (int) (a->ne[1] * a->ne[2] * a->ne[3]) : (int) a->ne[0];
//     const int per = (M + nth - 1) / nth;
//     const int m0 = ith * per, m1 = m0 + per < M ? m0 + per : M;
//     if (m0 >= m1) return;
//     const float * A = (const float *) a->data;
//     const float * B = (const float *) b->data;
//     const float * Ablk = f->ta ? A + m0 : A + (size_t) m0 * K;
//     const int lda = f->ta ? M : K;
//     const int ldb = f->tb ? K : N;
//     cblas_sgemm(CblasRowMajor, f->ta ? CblasTrans : CblasNoTrans, f->tb ? CblasTrans : CblasNoTrans,
//                 m1 - m0, N, K, 1.0f, Ablk, lda, B, ldb, 0.0f, (float *) dst->data + (size_t) m0 * N, N);
// }
//
// static struct ggml_tensor * gglua_gemm_node(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
//                                             int ta, int tb, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
//     struct ggml_tensor * args[2] = {a, b};
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3, args, 2, gglua_gemm, -1, &gglua_gemm_kinds[ta * 2 + tb]);
//     ggml_set_name(t, "gemm"); // for the op profile
//     return t;
// }
// void gglua_conv_forward_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
// void gglua_conv_weight_grad_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
// void gglua_conv_input_grad_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
// static struct ggml_tensor * gglua_conv_node(struct ggml_context * ctx, int mode, struct ggml_tensor * a, struct ggml_tensor * b,
//                                             struct ggml_tensor * scratch, struct ggml_tensor * bias, int64_t ne0, int64_t ne1,
//                                             int64_t ne2, int64_t ne3, uint64_t code) {
//     struct ggml_tensor * args[4] = {a, b, scratch, bias};
//     ggml_custom_op_t f = mode == 0 ? gglua_conv_forward_f32 : mode == 1 ? gglua_conv_weight_grad_f32 : gglua_conv_input_grad_f32;
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3, args, bias ? 4 : 3, f, -1, (void *) (uintptr_t) code);
//     ggml_set_name(t, "conv");
//     return t;
// }
// static void gglua_blas_init(void) { openblas_set_num_threads(1); }
import "C"

import "fmt"

func init() { C.gglua_blas_init() } // ggml's threads split the work; each BLAS call runs on one

// BLASAvailable reports whether Gemm runs (this build links OpenBLAS).
func BLASAvailable() bool { return true }

// Gemm is op(a)·op(b) for contiguous f32 tensors seen as matrices (every dim
// past ne0 counts as rows, so [B, m, k] is [B*m, k]): op(a) is [M, K], op(b)
// [K, N], and the result has ne out, whose rows multiply to M and whose ne0
// is N. Transposed operands cost nothing: BLAS reads them in place. A CPU
// custom op.
func (c *Context) Gemm(a, b Tensor, ta, tb bool, out [MaxDims]int64) (Tensor, error) {
	if err := c.checkF32("gemm", a, b); err != nil {
		return Tensor{}, err
	}
	if !a.contiguous() || !b.contiguous() {
		return Tensor{}, fmt.Errorf("gemm: needs contiguous operands")
	}
	matrix := func(t Tensor) (rows, cols int64) { ne := t.Ne(); return ne[1] * ne[2] * ne[3], ne[0] }
	ra, ca := matrix(a)
	rb, cb := matrix(b)
	m, k := ra, ca
	if ta {
		m, k = ca, ra
	}
	kb, n := rb, cb
	if tb {
		kb, n = cb, rb
	}
	if k != kb || out[0] != n || out[1]*out[2]*out[3] != m || m > 1<<30 || n > 1<<30 || k > 1<<30 {
		return Tensor{}, fmt.Errorf("gemm: cannot multiply ne %v by ne %v (transposed %v, %v) into ne %v", a.Ne(), b.Ne(), ta, tb, out)
	}
	return result(C.gglua_gemm_node(c.p, a.p, b.p, cbool(ta), cbool(tb), C.int64_t(out[0]), C.int64_t(out[1]), C.int64_t(out[2]), C.int64_t(out[3])))
}

// ConvCPU is one of a 2-d convolution's three products by window w, image
// by image (conv_blas.c): ConvForward (x [N, C, H, W], weight ne (C·KH·KW,
// OC)) -> [N, OC, OH, OW], plus bias (OC) where bias is not Tensor{};
// ConvWeightGrad (g [N, OC, OH, OW], x) -> ne (C·KH·KW, OC); ConvInputGrad
// (g, weight) -> out, the input's shape. scratch (f32, ne (OH·OW·C·KH·KW,
// T)) holds one image's patches for each of up to T threads. Every operand
// is packed f32 and every shape is checked here: the kernel trusts them. A
// CPU custom op running OpenBLAS.
func (c *Context) ConvCPU(mode ConvMode, a, b, scratch, bias Tensor, out [MaxDims]int64, w Window) (Tensor, error) {
	code, err := w.code()
	for _, t := range []Tensor{a, b, scratch} {
		if err == nil {
			err = c.checkPackedF32("conv", t)
		}
	}
	if err != nil {
		return Tensor{}, err
	}
	x, g, wt := a.Ne(), a.Ne(), b.Ne() // which is which, by mode
	switch mode {
	case ConvForward:
		g = out
	case ConvWeightGrad:
		x, wt = b.Ne(), out
	case ConvInputGrad:
		x = out
	default:
		return Tensor{}, fmt.Errorf("conv: unknown mode %d", mode)
	}
	oh, ow := w.out(x[1], x[0])
	kk := x[2] * int64(w.Kernel[0]) * int64(w.Kernel[1])
	p := oh * ow
	fits := oh >= 1 && ow >= 1 && wt == [MaxDims]int64{kk, g[2], 1, 1} && g == [MaxDims]int64{ow, oh, g[2], x[3]} &&
		scratch.Ne()[0] >= p*kk && scratch.Ne()[1] >= 1 && scratch.Ne()[2] == 1 && scratch.Ne()[3] == 1
	for _, v := range []int64{p * kk, g[2] * p, g[2] * kk, x[0] * x[1] * x[2]} {
		fits = fits && v > 0 && v <= 1<<30
	}
	if !fits {
		return Tensor{}, fmt.Errorf("conv: input ne %v, weight ne %v, output ne %v and scratch ne %v do not fit window %+v", x, wt, g, scratch.Ne(), w)
	}
	var biasp *C.struct_ggml_tensor
	if bias.p != nil {
		if err := c.checkPackedF32("conv", bias); err != nil {
			return Tensor{}, err
		}
		if mode != ConvForward || bias.Ne() != [MaxDims]int64{g[2], 1, 1, 1} {
			return Tensor{}, fmt.Errorf("conv: a bias of ne %v for weight ne %v (the forward's only)", bias.Ne(), wt)
		}
		biasp = bias.p
	}
	return result(C.gglua_conv_node(c.p, C.int(mode), a.p, b.p, scratch.p, biasp,
		C.int64_t(out[0]), C.int64_t(out[1]), C.int64_t(out[2]), C.int64_t(out[3]), C.uint64_t(code)))
}
