// gglua-gemm.cuh - autocast's products: the gemm_bf16_XY nodes (bf16.c on
// the CPU) on cuBLAS and cuBLASLt, a Linear layer's bias in the product's
// epilogue, the sums in f32, written as f32 or rounded to bf16. Included by
// gglua-kernels.cu after its elementwise helpers (gglua_load, gglua_store,
// gglua_launch_map, gglua_only_srcs), which it uses.
#pragma once

#include <cublasLt.h>

// gglua_bf16_operand is t's values in bf16: t's own data if it is bf16,
// else a rounded copy in buf (ggml's pool, returned when buf goes).
static const nv_bfloat16 * gglua_bf16_operand(cudaStream_t stream, const ggml_tensor * t, ggml_cuda_pool_alloc<nv_bfloat16> & buf) {
    if (t->type == GGML_TYPE_BF16) {
        return (const nv_bfloat16 *) t->data;
    }
    const int64_t n = ggml_nelements(t);
    nv_bfloat16 * y = buf.alloc(n);
    gglua_launch_map<1>(stream, (const float *) t->data, (const float *) nullptr, (const float *) nullptr, y, n, gglua_copy());
    return y;
}

// A gemm_bf16_XY node (X, Y: n or t, whether a and b are used transposed)
// is dst [m, n] = op(a) [m, k] · op(b) [k, n], row-major, every dim past
// ne0 a row; a and b contiguous f32 or bf16, dst contiguous f32 or bf16
// (the f32 sums rounded once, as PyTorch's autocast writes a product);
// with a third source, bias (an f32 row of n), added to every row of the
// sums.
struct gglua_gemm {
    bool ta, tb;
    int64_t m, n, k;
    const float * bias;
    bool bf16; // dst is bf16
};

static bool gglua_gemm_of(const ggml_tensor * dst, gglua_gemm * g) {
    const char * name = dst->name;
    if (dst->op != GGML_OP_CUSTOM || strncmp(name, "gemm_bf16_", 10) != 0 || strlen(name) != 12 ||
        (name[10] != 'n' && name[10] != 't') || (name[11] != 'n' && name[11] != 't')) {
        return false;
    }
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    for (int s = 0; s < 2; s++) {
        const ggml_tensor * t = dst->src[s];
        if (t == nullptr || (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_BF16) || !ggml_is_contiguous(t)) {
            return false;
        }
    }
    const ggml_tensor * bias = dst->src[2];
    if (!gglua_only_srcs(dst, 3) || (dst->type != GGML_TYPE_F32 && dst->type != GGML_TYPE_BF16) || !ggml_is_contiguous(dst)) {
        return false;
    }
    if (bias != nullptr && (bias->type != GGML_TYPE_F32 || !ggml_is_contiguous(bias) || ggml_nelements(bias) != dst->ne[0])) {
        return false;
    }
    g->bias = bias != nullptr ? (const float *) bias->data : nullptr;
    g->bf16 = dst->type == GGML_TYPE_BF16;
    g->ta = name[10] == 't';
    g->tb = name[11] == 't';
    g->m = g->ta ? a->ne[0] : ggml_nrows(a);
    g->k = g->ta ? ggml_nrows(a) : a->ne[0];
    const int64_t kb = g->tb ? b->ne[0] : ggml_nrows(b);
    g->n = g->tb ? ggml_nrows(b) : b->ne[0];
    const int64_t most = 1 << 30; // cuBLAS takes ints
    return g->k == kb && dst->ne[0] == g->n && ggml_nrows(dst) == g->m && g->m <= most && g->n <= most && g->k <= most;
}

// gglua_pad_bf16 copies the row-major [rows, cols] f32 or bf16 matrix a
// into d [rows_p, cols_p] as bf16, zeros past a's rows and columns.
// blockIdx.y walks the rows (strided: a grid's y is at most 65535).
template <typename T>
static __global__ void gglua_pad_bf16(const T * a, nv_bfloat16 * d, const int64_t rows, const int64_t cols, const int64_t rows_p,
                                      const int64_t cols_p) {
    const int64_t c = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols_p) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows_p; r += gridDim.y) {
        d[r * cols_p + c] = r < rows && c < cols ? __float2bfloat16_rn(gglua_load(a + r * cols + c)) : __float2bfloat16_rn(0.0f);
    }
}

// gglua_padded_operand is t [rows, cols] as bf16 [rows_p, cols_p] in buf.
static const nv_bfloat16 * gglua_padded_operand(cudaStream_t stream, const ggml_tensor * t, int64_t rows, int64_t cols, int64_t rows_p,
                                                int64_t cols_p, ggml_cuda_pool_alloc<nv_bfloat16> & buf) {
    nv_bfloat16 * y = buf.alloc(rows_p * cols_p);
    const dim3 grid((unsigned int) ((cols_p + GGLUA_BLOCK - 1) / GGLUA_BLOCK), (unsigned int) std::min<int64_t>(rows_p, 65535));
    if (t->type == GGML_TYPE_BF16) {
        gglua_pad_bf16<<<grid, GGLUA_BLOCK, 0, stream>>>((const nv_bfloat16 *) t->data, y, rows, cols, rows_p, cols_p);
    } else {
        gglua_pad_bf16<<<grid, GGLUA_BLOCK, 0, stream>>>((const float *) t->data, y, rows, cols, rows_p, cols_p);
    }
    return y;
}

// gglua_finish_rows writes d [m, n] (T: f32 or bf16, rounded) = the f32
// sums s (rows of ld, at least n) plus bias (one per column, or none): a
// padded product's result, or a bf16 one whose bias cuBLASLt did not add.
// blockIdx.y walks the rows (strided: a grid's y is at most 65535).
template <typename T>
static __global__ void gglua_finish_rows(const float * s, const int64_t ld, const float * bias, T * d, const int64_t n, const int64_t m) {
    const int64_t c = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) {
        return;
    }
    const float bv = bias != nullptr ? bias[c] : 0.0f;
    for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
        gglua_store(d + r * n + c, s[r * ld + c] + bv);
    }
}

static void gglua_finish(cudaStream_t stream, ggml_tensor * dst, const gglua_gemm & g, const float * s, int64_t ld, const float * bias) {
    const dim3 grid((unsigned int) ((g.n + GGLUA_BLOCK - 1) / GGLUA_BLOCK), (unsigned int) std::min<int64_t>(g.m, 65535));
    if (g.bf16) {
        gglua_finish_rows<<<grid, GGLUA_BLOCK, 0, stream>>>(s, ld, bias, (nv_bfloat16 *) dst->data, g.n, g.m);
    } else {
        gglua_finish_rows<<<grid, GGLUA_BLOCK, 0, stream>>>(s, ld, bias, (float *) dst->data, g.n, g.m);
    }
}

// gglua_lt is a cuBLASLt handle for the current device, made once.
static cublasLtHandle_t gglua_lt() {
    static cublasLtHandle_t handles[GGML_CUDA_MAX_DEVICES] = {};
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    if (handles[dev] == nullptr) {
        CUBLAS_CHECK(cublasLtCreate(&handles[dev]));
    }
    return handles[dev];
}

// gglua_gemm_bias_lt is the column-major D [rows, cols] = op(A)·op(B) +
// bias (one per row of D, f32) on cuBLASLt, the bias added by its epilogue
// to the f32 sums before D (of type dt: f32, or bf16 rounded) is written:
// a Linear layer's product and bias in one pass over D. Returns false
// where cuBLASLt has no algorithm for it (the caller then adds the bias
// itself).
static bool gglua_gemm_bias_lt(ggml_backend_cuda_context & ctx, cublasOperation_t opa, cublasOperation_t opb, int rows, int cols, int k,
                               const nv_bfloat16 * A, int lda, const nv_bfloat16 * B, int ldb, void * D, cudaDataType_t dt,
                               const float * bias) {
    cublasLtHandle_t lt = gglua_lt();
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    const size_t ws_bytes = 32u << 20;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    const cudaDataType_t bias_type = CUDA_R_32F; // the bias is f32 whatever D is
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, opa == CUBLAS_OP_N ? rows : k, opa == CUBLAS_OP_N ? k : rows, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, opb == CUBLAS_OP_N ? k : cols, opb == CUBLAS_OP_N ? cols : k, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, dt, rows, cols, rows));
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
    cublasLtMatmulHeuristicResult_t heur = {};
    int found = 0;
    const bool ok = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found) == CUBLAS_STATUS_SUCCESS && found > 0;
    bool ran = false;
    if (ok) {
        ggml_cuda_pool_alloc<char> ws(ctx.pool(), std::max<size_t>(heur.workspaceSize, 1));
        const float alpha = 1.0f, beta = 0.0f;
        ran = cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &heur.algo, ws.get(), heur.workspaceSize, ctx.stream()) ==
              CUBLAS_STATUS_SUCCESS;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(desc);
    return ran;
}

// gglua_gemm_bf16 runs g on cuBLAS: bf16 operands (rounded by
// gglua_bf16_operand where they are f32), f32 sums written straight to dst
// (no bf16 result to widen; a bf16 dst gets them rounded by cuBLAS).
// Row-major dst = op(a)·op(b) is column-major dstᵀ = op(b)ᵀ·op(a)ᵀ, and a
// row-major matrix read column-major is its transpose: so cuBLAS gets b
// first, each operand transposed as gglua's.
//
// cuBLAS runs its tensor-core kernels only on leading dims of 16 bytes:
// with a dim that is not a multiple of 8 (a 65-symbol vocabulary's head,
// or GPT-2's 50257) it fell back to kernels 2-2.5x slower than the padded
// shape's (0.0247 against 0.0098 ms for [8192, 768] by [768, 72] on an
// H200, docs/BENCHMARKS.md). So such a product runs on copies with every
// dim padded with zeros to a multiple of 8 (the padded sums are the same),
// into f32 sums that gglua_finish copies out, with the bias, where m or n
// grew. A bf16 result whose bias cuBLASLt does not add is summed in f32
// and finished so too (the bias goes in before the rounding).
static void gglua_gemm_bf16(ggml_backend_cuda_context & ctx, ggml_tensor * dst, const gglua_gemm & g) {
    cudaStream_t stream = ctx.stream();
    if (g.m == 0 || g.n == 0) {
        return;
    }
    if (g.k == 0) {
        ggml_cuda_pool_alloc<float> d32(ctx.pool());
        float * s = d32.alloc(g.m * g.n);
        CUDA_CHECK(cudaMemsetAsync(s, 0, g.m * g.n * sizeof(float), stream));
        gglua_finish(stream, dst, g, s, g.n, g.bias);
        return;
    }
    const auto up8 = [](int64_t d) { return (d + 7) / 8 * 8; };
    const int64_t m = up8(g.m), n = up8(g.n), k = up8(g.k);
    const bool pad = m != g.m || n != g.n || k != g.k;
    // ggml's pool frees in the reverse order of its allocations: d32, the
    // last allocated, is declared last (destroyed first).
    ggml_cuda_pool_alloc<nv_bfloat16> a16(ctx.pool()), b16(ctx.pool());
    ggml_cuda_pool_alloc<float> d32(ctx.pool());
    const nv_bfloat16 *A, *B;
    if (pad) {
        A = g.ta ? gglua_padded_operand(stream, dst->src[0], g.k, g.m, k, m, a16) : gglua_padded_operand(stream, dst->src[0], g.m, g.k, m, k, a16);
        B = g.tb ? gglua_padded_operand(stream, dst->src[1], g.n, g.k, n, k, b16) : gglua_padded_operand(stream, dst->src[1], g.k, g.n, k, n, b16);
    } else {
        A = gglua_bf16_operand(stream, dst->src[0], a16);
        B = gglua_bf16_operand(stream, dst->src[1], b16);
    }
    const cudaDataType_t dt = g.bf16 ? CUDA_R_16BF : CUDA_R_32F;
    if (g.bias != nullptr && !pad && (uintptr_t) g.bias % 16 == 0 &&
        gglua_gemm_bias_lt(ctx, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int) n, (int) m, (int) k, B,
                           (int) (g.tb ? k : n), A, (int) (g.ta ? m : k), dst->data, dt, g.bias)) {
        return;
    }
    // cuBLAS writes dst itself where nothing is left to do after it: an f32
    // result of the real shape (its bias added after), or a bf16 one with
    // no bias; else f32 sums, finished into dst.
    const bool direct = !pad && (!g.bf16 || g.bias == nullptr);
    void * D = direct ? dst->data : (void *) d32.alloc(m * n);
    const cudaDataType_t ct = direct ? dt : CUDA_R_32F;
    const float alpha = 1.0f, beta = 0.0f;
    cublasHandle_t h = ctx.cublas_handle();
    CUBLAS_CHECK(cublasSetStream(h, stream));
    CUBLAS_CHECK(cublasGemmEx(h, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int) n, (int) m, (int) k,
                              &alpha, B, CUDA_R_16BF, (int) (g.tb ? k : n), A, CUDA_R_16BF, (int) (g.ta ? m : k),
                              &beta, D, ct, (int) n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    if (!direct) {
        gglua_finish(stream, dst, g, (const float *) D, n, g.bias);
    } else if (g.bias != nullptr) {
        gglua_finish(stream, dst, g, (const float *) D, n, g.bias); // in place: each element read, then written
    }
}
