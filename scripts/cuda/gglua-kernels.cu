// gglua-kernels.cu - the CUDA side of gglua's custom ops. gglua builds each
// as a ggml custom node whose CPU kernel is in ggmlcgo (relu.c,
// gelu.c, bf16.c); here the same node, matched by its name, runs as one CUDA
// kernel on ggml-cuda's stream, so it joins ggml's CUDA graphs. The values
// are the CPU kernels' (PyTorch's): relu keeps NaN, its gradient selects
// rather than multiplies by a mask (an infinite gradient where relu's
// result is 0 gives 0, not NaN). Built in ggml-cuda's target, with its flags
// (-use_fast_math: subnormals flush to 0, expf and the division are the
// fast forms, as in ggml's own kernels).
#include "convert.cuh"
#include "gglua-flash-attn.cuh"
#include "gglua-layer-norm.cuh"
#include "gglua-kernels.cuh"
#include "gglua_collective.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#define GGLUA_BLOCK 256

// ---- the ops, one element each ----

// NaN stays NaN and -0 stays -0, as PyTorch's (max(x, 0) keeps x when the
// two compare equal); -0 is matched by its bits, as -use_fast_math compares
// a negative subnormal equal to 0 and it must give +0.
struct gglua_relu {
    __device__ float operator()(float x, float, float) const {
        return x > 0.0f || isnan(x) || __float_as_uint(x) == 0x80000000u ? x : 0.0f;
    }
};

// PyTorch's threshold_backward of the result: g where relu(x) > 0 or is NaN.
struct gglua_relu_back {
    __device__ float operator()(float g, float y, float) const { return y > 0.0f || isnan(y) ? g : 0.0f; }
};

// g · (Φ(x) + x φ(x)), Φ from erf as PyTorch's gelu backward computes it
// (so the tape need not keep the forward's result); x φ(x) is NaN at ±inf,
// as in PyTorch.
struct gglua_gelu_back {
    __device__ float operator()(float g, float x, float) const {
        const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
        const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
        return g * (cdf + x * pdf);
    }
};

// x Φ(x), Φ from erf: PyTorch's exact GELU.
struct gglua_gelu {
    __device__ float operator()(float x, float, float) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};

// ---- elementwise launches ----

// gglua_load reads an f32 or bf16 element as f32; gglua_load4 four of
// them (one 16- or 8-byte load). gglua_store writes v as T: f32, or bf16
// rounded to nearest, ties to even (as PyTorch and ggml round: a result
// rounded for a product, which would round it the same way); gglua_store4
// four of them.
static __device__ __forceinline__ float gglua_load(const float * a) { return *a; }
static __device__ __forceinline__ float gglua_load(const nv_bfloat16 * a) { return __bfloat162float(*a); }
static __device__ __forceinline__ float4 gglua_load4(const float * a) { return *(const float4 *) a; }
static __device__ __forceinline__ float4 gglua_load4(const nv_bfloat16 * a) {
    const float2 lo = __bfloat1622float2(*(const __nv_bfloat162 *) a);
    const float2 hi = __bfloat1622float2(*(const __nv_bfloat162 *) (a + 2));
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}
static __device__ __forceinline__ void gglua_store(float * d, float v) { *d = v; }
static __device__ __forceinline__ void gglua_store(nv_bfloat16 * d, float v) { *d = __float2bfloat16_rn(v); }
static __device__ __forceinline__ void gglua_store4(float * d, float4 v) { *(float4 *) d = v; }
static __device__ __forceinline__ void gglua_store4(nv_bfloat16 * d, float4 v) {
    *(__nv_bfloat162 *) d = __floats2bfloat162_rn(v.x, v.y);
    *(__nv_bfloat162 *) (d + 2) = __floats2bfloat162_rn(v.z, v.w);
}

// The copy: to_bf16 is gglua_map of it into bf16.
struct gglua_copy {
    __device__ float operator()(float x, float, float) const { return x; }
};

// gglua_map4 is d = f(a, b, c) over n elements (the first N operands
// read), four per thread as vector loads and stores (ggml's kernels for
// these ops, one float a thread, ran at 2/3 of the memory bandwidth); the
// last thread takes the tail of n that is not a multiple of 4. Every
// pointer aligned to four of its elements.
template <int N, typename A, typename B, typename C, typename D, typename F>
static __global__ void gglua_map4(const A * __restrict__ a, const B * __restrict__ b, const C * __restrict__ c, D * __restrict__ d,
                                  const int64_t n, const F f) {
    const int64_t i = 4 * ((int64_t) blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 4 <= n) {
        const float4 x = gglua_load4(a + i);
        const float4 y = N > 1 ? gglua_load4(b + i) : x;
        const float4 z = N > 2 ? gglua_load4(c + i) : x;
        gglua_store4(d + i, make_float4(f(x.x, y.x, z.x), f(x.y, y.y, z.y), f(x.z, y.z, z.z), f(x.w, y.w, z.w)));
        return;
    }
    for (int64_t j = i; j < n; j++) {
        gglua_store(d + j, f(gglua_load(a + j), N > 1 ? gglua_load(b + j) : 0.0f, N > 2 ? gglua_load(c + j) : 0.0f));
    }
}

// gglua_map1 is gglua_map4 one element a thread, grid-strided: for
// operands that are not aligned so.
template <int N, typename A, typename B, typename C, typename D, typename F>
static __global__ void gglua_map1(const A * a, const B * b, const C * c, D * d, const int64_t n, const F f) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        gglua_store(d + i, f(gglua_load(a + i), N > 1 ? gglua_load(b + i) : 0.0f, N > 2 ? gglua_load(c + i) : 0.0f));
    }
}

// gglua_aligned4 reports whether p (nullptr: an operand not read) is
// aligned to four of its elements, as gglua_load4 and gglua_store4 need.
template <typename T> static bool gglua_aligned4(const T * p) { return p == nullptr || (uintptr_t) p % (4 * sizeof(T)) == 0; }

// gglua_launch_map runs d = f(a, b, c) over n elements on stream: four a
// thread where every operand allows it, else one.
template <int N, typename A, typename B, typename C, typename D, typename F>
static void gglua_launch_map(cudaStream_t stream, const A * a, const B * b, const C * c, D * d, const int64_t n, const F f) {
    if (n == 0) {
        return;
    }
    if (gglua_aligned4(a) && gglua_aligned4(b) && gglua_aligned4(c) && gglua_aligned4(d)) {
        const int64_t blocks = ((n + 3) / 4 + GGLUA_BLOCK - 1) / GGLUA_BLOCK; // < 2^31 below 2^41 elements
        gglua_map4<N><<<(unsigned int) blocks, GGLUA_BLOCK, 0, stream>>>(a, b, c, d, n, f);
    } else {
        const int64_t blocks = std::min<int64_t>((n + GGLUA_BLOCK - 1) / GGLUA_BLOCK, 1 << 30);
        gglua_map1<N><<<(unsigned int) blocks, GGLUA_BLOCK, 0, stream>>>(a, b, c, d, n, f);
    }
}

// gglua_map runs dst = f(its first N operands), all f32.
template <int N, typename F>
static void gglua_map(cudaStream_t stream, const ggml_tensor * dst, const F f) {
    const float * a = (const float *) dst->src[0]->data;
    const float * b = N > 1 ? (const float *) dst->src[1]->data : nullptr;
    const float * c = N > 2 ? (const float *) dst->src[2]->data : nullptr;
    gglua_launch_map<N>(stream, a, b, c, (float *) dst->data, ggml_nelements(dst), f);
}

// gglua_relu_back_of_bf16 runs relu_back reading relu's result in bf16
// (its sign and NaN are the f32 result's) into T (f32, or bf16 for a
// product's gradient).
template <typename T>
static void gglua_relu_back_of_bf16(cudaStream_t stream, const ggml_tensor * dst) {
    gglua_launch_map<2>(stream, (const float *) dst->src[0]->data, (const nv_bfloat16 *) dst->src[1]->data, (const float *) nullptr,
                        (T *) dst->data, ggml_nelements(dst), gglua_relu_back());
}

// gglua_only_srcs reports whether dst has no operand past its first n.
static bool gglua_only_srcs(const ggml_tensor * dst, int n) {
    for (int s = n; s < GGML_MAX_SRC; s++) {
        if (dst->src[s] != nullptr) {
            return false;
        }
    }
    return true;
}

// gglua_bias_relu is d = relu(a + bias) for a of rows of ne0 and bias one
// row: blockIdx.y walks the rows (strided: a grid's y is at most 65535),
// x the columns, so no thread divides to find its column.
template <typename T>
static __global__ void gglua_bias_relu(const float * a, const float * bias, T * d, const int64_t ne0, const int64_t rows) {
    const int64_t col = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= ne0) {
        return;
    }
    const float bv = bias[col];
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        gglua_store(d + r * ne0 + col, gglua_relu()(a[r * ne0 + col] + bv, 0.0f, 0.0f));
    }
}

// ---- column sums (a bias's gradient) ----

// gglua_col_part sums column col of a over the rows of slice blockIdx.y
// (per rows each) into part; gglua_col_finish adds the slices' sums in
// order, so the result does not depend on scheduling (no atomics).
template <typename T>
static __global__ void gglua_col_part(const T * a, float * part, const int64_t ne0, const int64_t rows, const int64_t per) {
    const int64_t col = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= ne0) {
        return;
    }
    const int64_t end = ((int64_t) blockIdx.y + 1) * per, r1 = end < rows ? end : rows;
    float s = 0.0f;
    for (int64_t r = (int64_t) blockIdx.y * per; r < r1; r++) {
        s += gglua_load(a + r * ne0 + col);
    }
    part[(int64_t) blockIdx.y * ne0 + col] = s;
}

static __global__ void gglua_col_finish(const float * part, float * d, const int64_t ne0, const int slices) {
    const int64_t col = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= ne0) {
        return;
    }
    float s = 0.0f;
    for (int k = 0; k < slices; k++) {
        s += part[k * ne0 + col];
    }
    d[col] = s;
}

template <typename T>
static void gglua_col_sum(ggml_backend_cuda_context & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const int64_t ne0 = a->ne[0], rows = ggml_nrows(a);
    if (ne0 == 0) {
        return;
    }
    cudaStream_t stream = ctx.stream();
    // Enough slices to fill the GPU (64 rows at least each), at most 64.
    const int slices = (int) std::max<int64_t>(1, std::min<int64_t>(64, rows / 64));
    const int64_t per = (rows + slices - 1) / slices;
    ggml_cuda_pool_alloc<float> part(ctx.pool(), slices * ne0);
    const unsigned int xs = (unsigned int) ((ne0 + GGLUA_BLOCK - 1) / GGLUA_BLOCK);
    gglua_col_part<T><<<dim3(xs, (unsigned int) slices), GGLUA_BLOCK, 0, stream>>>((const T *) a->data, part.get(), ne0, rows, per);
    gglua_col_finish<<<xs, GGLUA_BLOCK, 0, stream>>>(part.get(), (float *) dst->data, ne0, slices);
}

// gglua_is_col_sum reports whether dst is a col_sum node: an f32 row of
// ne0 from one contiguous f32 or bf16 operand.
static bool gglua_is_col_sum(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, "col_sum") != 0 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(dst) ||
        a == nullptr || (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_BF16) || !ggml_is_contiguous(a) ||
        dst->ne[0] != a->ne[0] || ggml_nelements(dst) != dst->ne[0]) {
        return false;
    }
    return gglua_only_srcs(dst, 1);
}

// ---- bf16 products (autocast): gglua-gemm.cuh, which uses the helpers above ----

#include "gglua-gemm.cuh"

// gglua_bias_relu4 is gglua_bias_relu four columns a thread, for ne0 a
// multiple of 4 and 16-byte aligned operands (one float a thread reached
// half the memory's bandwidth).

template <typename T>
static __global__ void gglua_bias_relu4(const float * a, const float * bias, T * d, const int64_t ne0, const int64_t rows) {
    const int64_t col = 4 * ((int64_t) blockIdx.x * blockDim.x + threadIdx.x);
    if (col >= ne0) {
        return;
    }
    const float4 bv = *(const float4 *) (bias + col);
    gglua_relu relu;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4 v = *(const float4 *) (a + r * ne0 + col);
        gglua_store4(d + r * ne0 + col,
                     make_float4(relu(v.x + bv.x, 0.0f, 0.0f), relu(v.y + bv.y, 0.0f, 0.0f), relu(v.z + bv.z, 0.0f, 0.0f), relu(v.w + bv.w, 0.0f, 0.0f)));
    }
}

// gglua_launch_bias_relu runs dst = relu(a + bias) into T.
template <typename T>
static void gglua_launch_bias_relu(cudaStream_t stream, const ggml_tensor * dst) {
    const int64_t ne0 = dst->ne[0], rows = ggml_nrows(dst);
    const float * a = (const float *) dst->src[0]->data;
    const float * bias = (const float *) dst->src[1]->data;
    T * d = (T *) dst->data;
    const unsigned int ys = (unsigned int) (rows < 65535 ? rows : 65535);
    if (ne0 % 4 == 0 && gglua_aligned4(a) && gglua_aligned4(bias) && gglua_aligned4(d)) {
        const dim3 grid((unsigned int) ((ne0 / 4 + GGLUA_BLOCK - 1) / GGLUA_BLOCK), ys);
        gglua_bias_relu4<T><<<grid, GGLUA_BLOCK, 0, stream>>>(a, bias, d, ne0, rows);
    } else {
        const dim3 grid((unsigned int) ((ne0 + GGLUA_BLOCK - 1) / GGLUA_BLOCK), ys);
        gglua_bias_relu<T><<<grid, GGLUA_BLOCK, 0, stream>>>(a, bias, d, ne0, rows);
    }
}

// ---- matching a node ----

// gglua_op is the index of dst's op in gglua_ops (-1: not one of gglua's,
// or operands these kernels do not take: all f32 and contiguous, of dst's
// shape; bias_relu's second operand a row of dst's ne0).
struct gglua_op_shape { const char * name; int n_src; };
static const gglua_op_shape gglua_ops[] = { {"relu", 1}, {"relu_back", 2}, {"gelu_back", 2}, {"bias_relu", 2} };
enum { GGLUA_RELU, GGLUA_RELU_BACK, GGLUA_GELU_BACK, GGLUA_BIAS_RELU };

// relu_back's second operand (relu's result) may be bf16: a bias_relu
// rounded for a product; so may gelu_back's (GELU's input, a product's
// result under autocast).
static bool gglua_operand_ok(const ggml_tensor * dst, int k, int s) {
    const ggml_tensor * src = dst->src[s];
    if (s >= gglua_ops[k].n_src) {
        return src == nullptr;
    }
    const bool bf16_ok = (k == GGLUA_RELU_BACK || k == GGLUA_GELU_BACK) && s == 1;
    if (src == nullptr || !(src->type == GGML_TYPE_F32 || (bf16_ok && src->type == GGML_TYPE_BF16)) || !ggml_is_contiguous(src)) {
        return false;
    }
    if (k == GGLUA_BIAS_RELU && s == 1) {
        return src->ne[0] == dst->ne[0] && ggml_nrows(src) == 1;
    }
    return ggml_are_same_shape(src, dst);
}

// Results are f32; bias_relu's may be bf16 (rounded for a product), and
// relu_back's of a bf16 result and gelu_back's (a gradient rounded for a
// product).
static int gglua_op(const ggml_tensor * dst) {
    if (dst->op != GGML_OP_CUSTOM || !ggml_is_contiguous(dst)) {
        return -1;
    }
    for (int k = 0; k < (int) (sizeof(gglua_ops) / sizeof(gglua_ops[0])); k++) {
        if (strcmp(dst->name, gglua_ops[k].name) != 0) {
            continue;
        }
        const bool bf16_ok = k == GGLUA_BIAS_RELU || k == GGLUA_GELU_BACK ||
                             (k == GGLUA_RELU_BACK && dst->src[1] != nullptr && dst->src[1]->type == GGML_TYPE_BF16);
        if (dst->type != GGML_TYPE_F32 && !(bf16_ok && dst->type == GGML_TYPE_BF16)) {
            return -1;
        }
        for (int s = 0; s < GGML_MAX_SRC; s++) {
            if (!gglua_operand_ok(dst, k, s)) {
                return -1;
            }
        }
        return k;
    }
    return -1;
}

// gglua_is_to_bf16 reports whether dst is a to_bf16 node: its one operand
// a contiguous f32 tensor of its shape, rounded into dst (contiguous bf16).
static bool gglua_is_to_bf16(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, "to_bf16") != 0 || dst->type != GGML_TYPE_BF16 || !ggml_is_contiguous(dst) ||
        a == nullptr || a->type != GGML_TYPE_F32 || !ggml_is_contiguous(a) || !ggml_are_same_shape(a, dst)) {
        return false;
    }
    return gglua_only_srcs(dst, 1);
}

// gglua_is_gelu_bf16 reports whether dst is a gelu_bf16 node: GELU of its
// one operand (contiguous f32 or bf16 of its shape) rounded into dst
// (contiguous bf16), the input of a product under autocast.
static bool gglua_is_gelu_bf16(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, "gelu_bf16") != 0 || dst->type != GGML_TYPE_BF16 || !ggml_is_contiguous(dst) ||
        a == nullptr || (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_BF16) || !ggml_is_contiguous(a) || !ggml_are_same_shape(a, dst)) {
        return false;
    }
    return gglua_only_srcs(dst, 1);
}

// gglua_gelu_back_as runs gelu_back reading x as X (f32, or bf16: a
// product's result) into D (f32, or bf16: a gradient a product rounds).
template <typename X, typename D>
static void gglua_gelu_back_as(cudaStream_t stream, const ggml_tensor * dst) {
    gglua_launch_map<2>(stream, (const float *) dst->src[0]->data, (const X *) dst->src[1]->data, (const float *) nullptr, (D *) dst->data,
                        ggml_nelements(dst), gglua_gelu_back());
}

// ---- collectives (data parallelism's gradient sums, gglua_collective.h) ----

// gglua_collective_of is the collective a node names (its userdata).
static gglua_collective * gglua_collective_of(const ggml_tensor * dst) {
    ggml_custom_op_params p;
    memcpy(&p, dst->op_params, sizeof p);
    return (gglua_collective *) p.userdata;
}

// gglua_is_collective reports whether dst is an all_reduce_mean node (of a
// contiguous f32 operand) or, join, an all_reduce_join: one f32 result.
static bool gglua_is_collective(const ggml_tensor * dst, bool join) {
    const ggml_tensor * a = dst->src[0];
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, join ? "all_reduce_join" : "all_reduce_mean") != 0 || dst->type != GGML_TYPE_F32 ||
        ggml_nelements(dst) != 1 || a == nullptr || !gglua_only_srcs(dst, 1) || gglua_collective_of(dst) == nullptr) {
        return false;
    }
    return join || (a->type == GGML_TYPE_F32 && ggml_is_contiguous(a));
}

// gglua_collective_failed records the first failure of c's calls (the
// host reads it after the compute: core's checkSums).
static bool gglua_collective_failed(gglua_collective * c, int kind, int code) {
    if (code != 0 && c->error == 0) {
        c->error = code;
        c->error_kind = kind;
    }
    return code != 0;
}

// gglua_all_reduce queues the average of dst's operand across the
// processes (in place, ncclAvg: f32 times 1/world before the sum, as
// PyTorch DDP divides) on the collective's own stream, after everything
// queued on stream so far: the graph's later nodes (the rest of the
// backward) run on beside it until gglua_all_reduce_join. Inside a CUDA
// graph capture the fork and the NCCL call are captured too (NCCL supports
// that).
//
// The stream has the device's highest priority. The backward's GEMMs fill
// every SM with blocks waiting their turn, and at equal priority NCCL's
// blocks would start only as the GEMM in flight ran out of them, so that
// the sums ran mostly after the backward instead of beside it; at a higher
// priority they take their SMs (about one a channel) as soon as any frees.
// (A CUDA graph keeps each kernel's priority only when instantiated to:
// hook-kernels.cmake makes ggml-cuda do so.)
static void gglua_all_reduce(cudaStream_t stream, ggml_tensor * dst) {
    gglua_collective * c = gglua_collective_of(dst);
    if (c->error != 0) {
        return; // an earlier call failed: the processes are out of step
    }
    if (c->device_all_reduce == nullptr) {
        gglua_collective_failed(c, GGLUA_COLLECTIVE_DEVICE, -1);
        return;
    }
    if (c->stream == nullptr) {
        cudaStream_t s;
        cudaEvent_t fork, join;
        int lowest, highest;
        if (gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaDeviceGetStreamPriorityRange(&lowest, &highest)) ||
            gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, highest)) ||
            gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaEventCreateWithFlags(&fork, cudaEventDisableTiming)) ||
            gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaEventCreateWithFlags(&join, cudaEventDisableTiming))) {
            return;
        }
        c->stream = s;
        c->fork = fork;
        c->join = join;
    }
    cudaStream_t side = (cudaStream_t) c->stream;
    if (gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaEventRecord((cudaEvent_t) c->fork, stream)) ||
        gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaStreamWaitEvent(side, (cudaEvent_t) c->fork, 0))) {
        return;
    }
    c->forked = 1; // side now waits on stream: the join must follow, whatever comes next
    const ggml_tensor * a = dst->src[0];
    if (gglua_collective_failed(c, GGLUA_COLLECTIVE_DEVICE, c->device_all_reduce(a->data, a->data, (size_t) ggml_nelements(a), 7, 4, c->comm, side))) {
        return;
    }
    gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaMemsetAsync(dst->data, 0, sizeof(float), stream));
}

// gglua_all_reduce_join makes stream wait for the sums queued since the
// last join.
static void gglua_all_reduce_join(cudaStream_t stream, ggml_tensor * dst) {
    gglua_collective * c = gglua_collective_of(dst);
    if (c->forked) {
        c->forked = 0;
        if (!gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaEventRecord((cudaEvent_t) c->join, (cudaStream_t) c->stream))) {
            gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaStreamWaitEvent(stream, (cudaEvent_t) c->join, 0));
        }
    }
    gglua_collective_failed(c, GGLUA_COLLECTIVE_CUDA, cudaMemsetAsync(dst->data, 0, sizeof(float), stream));
}

// ---- fused attention (gglua-flash-attn.cuh) ----

// gglua_flash_of reports whether dst is a bf16 flash_attn node (back: a
// flash_attn_back node) that the kernels take, and fills p but for its
// pointers' memory (flash_attn.c says the layouts; ggmlcgo's attention.go
// checked the shapes, and they are checked again here, as ggml would
// otherwise run a kernel out of bounds).
static bool gglua_flash_of(const ggml_tensor * dst, bool back, gglua_fa_params * p) {
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, back ? "flash_attn_back" : "flash_attn") != 0 ||
        dst->type != (back ? GGML_TYPE_F32 : GGML_TYPE_BF16) ||
        !ggml_is_contiguous(dst) || !gglua_only_srcs(dst, back ? 5 : 3)) {
        return false;
    }
    ggml_custom_op_params op;
    memcpy(&op, dst->op_params, sizeof op);
    const uint64_t code = (uint64_t) (uintptr_t) op.userdata;
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const int64_t D = q->ne[0], Tq = q->ne[1], Tk = k->ne[1], H = q->ne[2], B = q->ne[3];
    if (!((code >> 33) & 1) || !gglua_fa_head_dim(D) || Tq < 1 || Tk < 1 || Tq > (1 << 30) || Tk > (1 << 30) || H > 65535 || B > 65535 ||
        !ggml_are_same_shape(k, v) || k->ne[0] != D || k->ne[2] != H || k->ne[3] != B ||
        ggml_cuda_info().devices[ggml_cuda_get_device()].cc < GGML_CUDA_CC_AMPERE ||
        ggml_cuda_info().devices[ggml_cuda_get_device()].smpbo < gglua_fa_smem(D)) {
        return false;
    }
    const int n_rows = back ? 4 : 3;
    const ggml_tensor * rows[4] = {q, k, v, back ? dst->src[4] : nullptr};
    gglua_fa_rows * out[4] = {&p->q, &p->k, &p->v, &p->go};
    // q, k and v f32, or all three bf16 (a product's result under
    // autocast); the output's gradient f32.
    for (int i = 0; i < n_rows; i++) {
        const ggml_tensor * t = rows[i];
        const bool bf16 = i < 3 && q->type == GGML_TYPE_BF16;
        const size_t elem = bf16 ? 2 : 4, vec = 4 * elem;
        if (t->type != (bf16 ? GGML_TYPE_BF16 : GGML_TYPE_F32) || t->nb[0] != elem) {
            return false;
        }
        *out[i] = {(const char *) t->data, (int64_t) t->nb[1], (int64_t) t->nb[2], (int64_t) t->nb[3],
                   (uintptr_t) t->data % vec == 0 && t->nb[1] % vec == 0 && t->nb[2] % vec == 0 && t->nb[3] % vec == 0, bf16};
    }
    // The forward's run: the output in bf16, then the log-sum-exp's f32s,
    // two bf16 elements each.
    const int64_t nq = D * Tq * H * B, nk = D * Tk * H * B;
    if (back) {
        const ggml_tensor * fwd = dst->src[3];
        if (!ggml_are_same_shape(dst->src[4], q) || fwd->type != GGML_TYPE_BF16 || !ggml_is_contiguous(fwd) ||
            ggml_nelements(fwd) != nq + 2 * Tq * H * B || ggml_nelements(dst) != nq + 2 * nk) {
            return false;
        }
        p->out = (__nv_bfloat16 *) fwd->data;
        p->dq = (float *) dst->data;
        p->dk = p->dq + nq;
        p->dv = p->dk + nk;
    } else {
        if (ggml_nelements(dst) != nq + 2 * Tq * H * B) {
            return false;
        }
        p->out = (__nv_bfloat16 *) dst->data;
    }
    p->lse = (float *) (p->out + nq);
    p->Tq = (int) Tq;
    p->Tk = (int) Tk;
    p->H = (int) H;
    p->B = (int) B;
    const uint32_t bits = (uint32_t) code;
    memcpy(&p->scale, &bits, sizeof p->scale);
    p->causal = (code >> 32) & 1;
    return true;
}

// gglua_flash runs a flash_attn or flash_attn_back node (with p from
// gglua_flash_of), the backward's row sums in ggml's pool.
static void gglua_flash(ggml_backend_cuda_context & ctx, const ggml_tensor * dst, bool back, gglua_fa_params & p) {
    const int d = (int) dst->src[0]->ne[0];
    gglua_fa_raise_limits(); // ggml made the node's device current
    if (!back) {
        gglua_fa_forward(d, p, ctx.stream());
        return;
    }
    ggml_cuda_pool_alloc<float> delta(ctx.pool(), (size_t) p.B * p.H * p.Tq);
    p.delta = delta.get();
    gglua_fa_backward(d, p, ctx.stream());
}

// gglua_is_dequantize reports whether dst is a dequantize node: its one
// operand a contiguous tensor of a quantized type ggml-cuda converts, of
// dst's shape, into dst (contiguous f32).
static bool gglua_is_dequantize(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, "dequantize") != 0 || dst->type != GGML_TYPE_F32 || !ggml_is_contiguous(dst) ||
        a == nullptr || !ggml_is_quantized(a->type) || !ggml_is_contiguous(a) || !ggml_are_same_shape(a, dst) ||
        ggml_get_to_fp32_cuda(a->type) == nullptr) {
        return false;
    }
    return gglua_only_srcs(dst, 1);
}

bool gglua_cuda_supports(const ggml_tensor * dst) {
    gglua_gemm g;
    gglua_fa_params p;
    gglua_ln_params ln;
    return gglua_op(dst) >= 0 || gglua_gemm_of(dst, &g) || gglua_is_to_bf16(dst) || gglua_is_gelu_bf16(dst) || gglua_is_col_sum(dst) ||
           gglua_flash_of(dst, false, &p) || gglua_flash_of(dst, true, &p) || gglua_ln_of(dst, false, &ln) || gglua_ln_of(dst, true, &ln) ||
           gglua_is_collective(dst, false) || gglua_is_collective(dst, true) || gglua_is_dequantize(dst);
}

bool gglua_cuda_compute(ggml_backend_cuda_context & ctx, ggml_tensor * dst) {
    cudaStream_t stream = ctx.stream();
    gglua_gemm g;
    if (gglua_gemm_of(dst, &g)) {
        gglua_gemm_bf16(ctx, dst, g);
        return true;
    }
    gglua_fa_params p;
    for (bool back : {false, true}) {
        if (gglua_flash_of(dst, back, &p)) {
            gglua_flash(ctx, dst, back, p);
            return true;
        }
    }
    gglua_ln_params ln;
    for (bool back : {false, true}) {
        if (gglua_ln_of(dst, back, &ln)) {
            gglua_ln(ctx, back, ln);
            return true;
        }
    }
    if (gglua_is_col_sum(dst)) {
        if (dst->src[0]->type == GGML_TYPE_BF16) {
            gglua_col_sum<nv_bfloat16>(ctx, dst);
        } else {
            gglua_col_sum<float>(ctx, dst);
        }
        return true;
    }
    if (gglua_is_collective(dst, false)) {
        gglua_all_reduce(stream, dst);
        return true;
    }
    if (gglua_is_collective(dst, true)) {
        gglua_all_reduce_join(stream, dst);
        return true;
    }
    if (gglua_is_dequantize(dst)) {
        ggml_get_to_fp32_cuda(dst->src[0]->type)(dst->src[0]->data, (float *) dst->data, ggml_nelements(dst), stream);
        return true;
    }
    if (gglua_is_to_bf16(dst)) {
        gglua_launch_map<1>(stream, (const float *) dst->src[0]->data, (const float *) nullptr, (const float *) nullptr,
                            (nv_bfloat16 *) dst->data, ggml_nelements(dst), gglua_copy());
        return true;
    }
    if (gglua_is_gelu_bf16(dst)) {
        if (dst->src[0]->type == GGML_TYPE_BF16) {
            gglua_launch_map<1>(stream, (const nv_bfloat16 *) dst->src[0]->data, (const float *) nullptr, (const float *) nullptr,
                                (nv_bfloat16 *) dst->data, ggml_nelements(dst), gglua_gelu());
        } else {
            gglua_launch_map<1>(stream, (const float *) dst->src[0]->data, (const float *) nullptr, (const float *) nullptr,
                                (nv_bfloat16 *) dst->data, ggml_nelements(dst), gglua_gelu());
        }
        return true;
    }
    switch (gglua_op(dst)) {
        case GGLUA_RELU:
            gglua_map<1>(stream, dst, gglua_relu());
            return true;
        case GGLUA_RELU_BACK:
            if (dst->src[1]->type == GGML_TYPE_BF16) {
                if (dst->type == GGML_TYPE_BF16) {
                    gglua_relu_back_of_bf16<nv_bfloat16>(stream, dst);
                } else {
                    gglua_relu_back_of_bf16<float>(stream, dst);
                }
                return true;
            }
            gglua_map<2>(stream, dst, gglua_relu_back());
            return true;
        case GGLUA_GELU_BACK: {
            const bool x16 = dst->src[1]->type == GGML_TYPE_BF16, d16 = dst->type == GGML_TYPE_BF16;
            if (x16 && d16) {
                gglua_gelu_back_as<nv_bfloat16, nv_bfloat16>(stream, dst);
            } else if (x16) {
                gglua_gelu_back_as<nv_bfloat16, float>(stream, dst);
            } else if (d16) {
                gglua_gelu_back_as<float, nv_bfloat16>(stream, dst);
            } else {
                gglua_map<2>(stream, dst, gglua_gelu_back());
            }
            return true;
        }
        case GGLUA_BIAS_RELU:
            if (ggml_nelements(dst) == 0) {
                return true;
            }
            if (dst->type == GGML_TYPE_BF16) {
                gglua_launch_bias_relu<nv_bfloat16>(stream, dst);
            } else {
                gglua_launch_bias_relu<float>(stream, dst);
            }
            return true;
        default:
            return false;
    }
}
