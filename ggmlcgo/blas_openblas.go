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
// // gglua_conv_gemm is a convolution's three products over its patches
// // cols (ne (K, P, N): N images of P positions of K = C·KH·KW elements,
// // im2col's layout), with no layout copies: mode 0: dst (P, OC, N) =
// // w (K, OC) · cols_nᵀ per image (NCHW); mode 1: dst (K, OC) = Σ_n g_n
// // (P, OC) · cols_n (w's gradient); mode 2: dst (K, P, N) = g_nᵀ · w per
// // image (the patches' gradient). src0, src1: (w, cols), (g, cols), (g, w);
// // mode 0's src2, where given, is a bias (OC) added to every position.
// // Each thread takes a block of rows of every image (mode 1: of w).
// static void gglua_conv_gemm(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
//     const int mode = (int) (intptr_t) userdata;
//     const struct ggml_tensor * a = dst->src[0];
//     const struct ggml_tensor * b = dst->src[1];
//     const float * A = (const float *) a->data;
//     const float * B = (const float *) b->data;
//     float * D = (float *) dst->data;
//     if (mode == 0) {
//         const int K = (int) a->ne[0], OC = (int) a->ne[1], P = (int) b->ne[1], N = (int) b->ne[2];
//         const int per = (OC + nth - 1) / nth, r0 = ith * per, r1 = r0 + per < OC ? r0 + per : OC;
//         const float * bias = dst->src[2] ? (const float *) dst->src[2]->data : NULL;
//         for (int n = 0; n < N && r0 < r1; n++) {
//             float * Dn = D + ((size_t) n * OC + r0) * P;
//             cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, P, K, 1.0f, A + (size_t) r0 * K, K,
//                         B + (size_t) n * P * K, K, 0.0f, Dn, P);
//             for (int r = 0; bias && r < r1 - r0; r++) {
//                 for (int i = 0; i < P; i++) {
//                     Dn[(size_t) r * P + i] += bias[r0 + r];
//                 }
//             }
//         }
//     } else if (mode == 1) {
//         const int P = (int) a->ne[0], OC = (int) a->ne[1], N = (int) a->ne[2], K = (int) b->ne[0];
//         const int per = (OC + nth - 1) / nth, r0 = ith * per, r1 = r0 + per < OC ? r0 + per : OC;
//         for (int n = 0; n < N && r0 < r1; n++) {
//             cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, K, P, 1.0f, A + ((size_t) n * OC + r0) * P, P,
//                         B + (size_t) n * P * K, K, n ? 1.0f : 0.0f, D + (size_t) r0 * K, K);
//         }
//     } else {
//         const int P = (int) a->ne[0], OC = (int) a->ne[1], N = (int) a->ne[2], K = (int) b->ne[0];
//         const int per = (P + nth - 1) / nth, r0 = ith * per, r1 = r0 + per < P ? r0 + per : P;
//         for (int n = 0; n < N && r0 < r1; n++) {
//             cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r1 - r0, K, OC, 1.0f, A + (size_t) n * OC * P + r0, P,
//                         B, K, 0.0f, D + ((size_t) n * P + r0) * K, K);
//         }
//     }
// }
// static struct ggml_tensor * gglua_conv_gemm_node(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
//                                                  struct ggml_tensor * bias, int mode, int64_t ne0, int64_t ne1, int64_t ne2) {
//     struct ggml_tensor * args[3] = {a, b, bias};
//     struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, 1, args, bias ? 3 : 2, gglua_conv_gemm, -1, (void *) (intptr_t) mode);
//     ggml_set_name(t, "conv_gemm");
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

// ConvGemm is one of a convolution's three products over its patches
// cols (f32, ne (K, P, N): im2col's layout, K = C·KH·KW elements at P
// positions of N images), read in place: ConvForward (w (K, OC), cols) ->
// (P, OC, N), the output in NCHW, plus bias (OC) where bias is not
// Tensor{}; ConvWeightGrad (g (P, OC, N), cols) ->
// (K, OC), summed over the images; ConvPatchGrad (g, w) -> (K, P, N). A
// CPU custom op running OpenBLAS.
func (c *Context) ConvGemm(mode ConvGemmMode, a, b, bias Tensor) (Tensor, error) {
	if err := c.checkF32("conv_gemm", a, b); err != nil {
		return Tensor{}, err
	}
	var biasp *C.struct_ggml_tensor
	if bias.p != nil {
		if err := c.checkPackedF32("conv_gemm", bias); err != nil {
			return Tensor{}, err
		}
		if mode != ConvForward || bias.Ne() != [MaxDims]int64{a.Ne()[1], 1, 1, 1} {
			return Tensor{}, fmt.Errorf("conv_gemm: a bias of ne %v for weight ne %v (the forward's only)", bias.Ne(), a.Ne())
		}
		biasp = bias.p
	}
	if !a.contiguous() || !b.contiguous() {
		return Tensor{}, fmt.Errorf("conv_gemm: needs contiguous operands")
	}
	na, nb := a.Ne(), b.Ne()
	var out [3]int64
	switch mode {
	case ConvForward:
		if na[2] != 1 || na[3] != 1 || nb[0] != na[0] || nb[3] != 1 {
			return Tensor{}, fmt.Errorf("conv_gemm: weight ne %v and patches ne %v do not fit", na, nb)
		}
		out = [3]int64{nb[1], na[1], nb[2]}
	case ConvWeightGrad:
		if na[0] != nb[1] || na[2] != nb[2] || na[3] != 1 || nb[3] != 1 {
			return Tensor{}, fmt.Errorf("conv_gemm: gradient ne %v and patches ne %v do not fit", na, nb)
		}
		out = [3]int64{nb[0], na[1], 1}
	case ConvPatchGrad:
		if na[1] != nb[1] || nb[2] != 1 || na[3] != 1 || nb[3] != 1 {
			return Tensor{}, fmt.Errorf("conv_gemm: gradient ne %v and weight ne %v do not fit", na, nb)
		}
		out = [3]int64{nb[0], na[0], na[2]}
	default:
		return Tensor{}, fmt.Errorf("conv_gemm: unknown mode %d", mode)
	}
	for _, d := range append(na[:2:2], nb[:2]...) {
		if d > 1<<30 {
			return Tensor{}, fmt.Errorf("conv_gemm: a size past 2^30 (ne %v, %v)", na, nb)
		}
	}
	return result(C.gglua_conv_gemm_node(c.p, a.p, b.p, biasp, C.int(mode), C.int64_t(out[0]), C.int64_t(out[1]), C.int64_t(out[2])))
}
