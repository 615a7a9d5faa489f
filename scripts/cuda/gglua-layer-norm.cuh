// gglua-layer-norm.cuh - the fused LayerNorm's CUDA kernels: the forward
// and the backward nodes of ggmlcgo/layer_norm.c (which says the layouts
// and is the reference), one warp a row. The backward's dw and db are
// summed in 64 slices of rows at most, then the slices in order, so the
// result does not depend on scheduling (no atomics).
#pragma once

#include "common.cuh"

#include <cstdint>
#include <cstring>

struct gglua_ln_params {
    const float *x, *w, *b, *g; // g: the backward's output gradient
    float *y, *mean, *rstd;     // the forward's run (the backward reads a copy of mean and rstd)
    float *dx, *dw, *db;        // the backward's run
    int64_t n, rows;
    float eps;
};

static __device__ __forceinline__ float gglua_ln_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

#define GGLUA_LN_ROWS 8   // rows (warps) a block of the row kernels
#define GGLUA_LN_COLS 256 // columns (threads) a block of the column sums

static __global__ void gglua_ln_forward(const gglua_ln_params p) {
    const int64_t r = (int64_t) blockIdx.x * GGLUA_LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= p.rows) {
        return;
    }
    const float * x = p.x + r * p.n;
    float s = 0.0f;
    for (int64_t i = lane; i < p.n; i += 32) {
        s += x[i];
    }
    const float m = gglua_ln_warp_sum(s) / (float) p.n;
    float v = 0.0f;
    for (int64_t i = lane; i < p.n; i += 32) {
        const float d = x[i] - m;
        v += d * d;
    }
    const float rs = 1.0f / sqrtf(gglua_ln_warp_sum(v) / (float) p.n + p.eps);
    float * y = p.y + r * p.n;
    for (int64_t i = lane; i < p.n; i += 32) {
        float o = (x[i] - m) * rs;
        if (p.w) {
            o *= p.w[i];
        }
        if (p.b) {
            o += p.b[i];
        }
        y[i] = o;
    }
    if (lane == 0) {
        p.mean[r] = m;
        p.rstd[r] = rs;
    }
}

// dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)), ĝ = g · w.
static __global__ void gglua_ln_backward_dx(const gglua_ln_params p) {
    const int64_t r = (int64_t) blockIdx.x * GGLUA_LN_ROWS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= p.rows) {
        return;
    }
    const float * x = p.x + r * p.n;
    const float * g = p.g + r * p.n;
    const float m = p.mean[r], rs = p.rstd[r];
    float a = 0.0f, c = 0.0f;
    for (int64_t i = lane; i < p.n; i += 32) {
        const float gh = p.w ? g[i] * p.w[i] : g[i];
        a += gh;
        c += gh * ((x[i] - m) * rs);
    }
    const float ma = gglua_ln_warp_sum(a) / (float) p.n, mc = gglua_ln_warp_sum(c) / (float) p.n;
    float * dx = p.dx + r * p.n;
    for (int64_t i = lane; i < p.n; i += 32) {
        const float gh = p.w ? g[i] * p.w[i] : g[i];
        dx[i] = rs * (gh - ma - (x[i] - m) * rs * mc);
    }
}

// Slice blockIdx.y's sums of g·x̂ and g for column col, into part (the
// slices' dw sums, then their db sums).
static __global__ void gglua_ln_backward_part(const gglua_ln_params p, float * part, const int64_t per) {
    const int64_t col = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= p.n) {
        return;
    }
    const int64_t end = ((int64_t) blockIdx.y + 1) * per, r1 = end < p.rows ? end : p.rows;
    float sw = 0.0f, sb = 0.0f;
    for (int64_t r = (int64_t) blockIdx.y * per; r < r1; r++) {
        const float g = p.g[r * p.n + col];
        sw += g * ((p.x[r * p.n + col] - p.mean[r]) * p.rstd[r]);
        sb += g;
    }
    part[(int64_t) blockIdx.y * p.n + col] = sw;
    part[((int64_t) gridDim.y + blockIdx.y) * p.n + col] = sb;
}

static __global__ void gglua_ln_backward_finish(const gglua_ln_params p, const float * part, const int slices) {
    const int64_t col = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= p.n) {
        return;
    }
    float sw = 0.0f, sb = 0.0f;
    for (int k = 0; k < slices; k++) {
        sw += part[k * p.n + col];
        sb += part[(slices + k) * p.n + col];
    }
    p.dw[col] = sw;
    p.db[col] = sb;
}

// gglua_ln_blocks is the grid of the one-warp-a-row kernels.
static inline unsigned int gglua_ln_blocks(int64_t rows) { return (unsigned int) ((rows + GGLUA_LN_ROWS - 1) / GGLUA_LN_ROWS); }

// gglua_ln_slices is how many slices of rows the backward's column sums
// take: enough to fill the GPU (64 rows at least each), at most 64.
static inline int gglua_ln_slices(int64_t rows) {
    const int64_t s = rows / 64;
    return (int) (s < 1 ? 1 : s > 64 ? 64 : s);
}

// ---- matching and running a node ----

// gglua_ln_of reports whether dst is a layer_norm node (back: a
// layer_norm_back node) that the kernels take, and fills p (layer_norm.c
// says the layouts; ggmlcgo's layer_norm.go checked the shapes, and they
// are checked again here).
static bool gglua_ln_of(const ggml_tensor * dst, bool back, gglua_ln_params * p) {
    if (dst->op != GGML_OP_CUSTOM || strcmp(dst->name, back ? "layer_norm_back" : "layer_norm") != 0 || dst->type != GGML_TYPE_F32 ||
        !ggml_is_contiguous(dst)) {
        return false;
    }
    ggml_custom_op_params op;
    memcpy(&op, dst->op_params, sizeof op);
    const uint64_t code = (uint64_t) (uintptr_t) op.userdata;
    const bool hw = (code >> 32) & 1, hb = (code >> 33) & 1;
    const int nsrc = back ? 3 + hw : 1 + hw + hb;
    for (int s = nsrc; s < GGML_MAX_SRC; s++) {
        if (dst->src[s] != nullptr) {
            return false;
        }
    }
    for (int s = 0; s < nsrc; s++) {
        if (dst->src[s] == nullptr || dst->src[s]->type != GGML_TYPE_F32 || !ggml_is_contiguous(dst->src[s])) {
            return false;
        }
    }
    const ggml_tensor * x = dst->src[back ? 1 : 0];
    const int64_t n = x->ne[0], rows = ggml_nrows(x);
    const ggml_tensor * w = hw ? dst->src[back ? 3 : 1] : nullptr;
    const ggml_tensor * b = hb && !back ? dst->src[1 + hw] : nullptr;
    if (n < 1 || (w && ggml_nelements(w) != n) || (b && ggml_nelements(b) != n)) {
        return false;
    }
    *p = {};
    p->x = (const float *) x->data;
    p->w = w ? (const float *) w->data : nullptr;
    p->b = b ? (const float *) b->data : nullptr;
    p->n = n;
    p->rows = rows;
    const uint32_t bits = (uint32_t) code;
    memcpy(&p->eps, &bits, sizeof p->eps);
    if (back) {
        const ggml_tensor * stats = dst->src[2];
        if (!ggml_are_same_shape(dst->src[0], x) || ggml_nelements(stats) != 2 * rows || ggml_nelements(dst) != rows * n + 2 * n) {
            return false;
        }
        p->g = (const float *) dst->src[0]->data;
        p->mean = (float *) stats->data;
        p->dx = (float *) dst->data;
        p->dw = p->dx + rows * n;
        p->db = p->dw + n;
    } else {
        if (ggml_nelements(dst) != rows * n + 2 * rows) {
            return false;
        }
        p->y = (float *) dst->data;
        p->mean = p->y + rows * n;
    }
    p->rstd = p->mean + rows;
    return true;
}

// gglua_ln runs a layer_norm or layer_norm_back node (p from gglua_ln_of),
// the backward's slices in ggml's pool.
static void gglua_ln(ggml_backend_cuda_context & ctx, bool back, const gglua_ln_params & p) {
    cudaStream_t stream = ctx.stream();
    if (p.rows == 0) {
        if (back) {
            CUDA_CHECK(cudaMemsetAsync(p.dw, 0, 2 * p.n * sizeof(float), stream));
        }
        return;
    }
    if (!back) {
        gglua_ln_forward<<<gglua_ln_blocks(p.rows), 32 * GGLUA_LN_ROWS, 0, stream>>>(p);
        return;
    }
    gglua_ln_backward_dx<<<gglua_ln_blocks(p.rows), 32 * GGLUA_LN_ROWS, 0, stream>>>(p);
    const int slices = gglua_ln_slices(p.rows);
    const int64_t per = (p.rows + slices - 1) / slices;
    ggml_cuda_pool_alloc<float> part(ctx.pool(), 2 * slices * p.n);
    const unsigned int xs = (unsigned int) ((p.n + GGLUA_LN_COLS - 1) / GGLUA_LN_COLS);
    gglua_ln_backward_part<<<dim3(xs, (unsigned int) slices), GGLUA_LN_COLS, 0, stream>>>(p, part.get(), per);
    gglua_ln_backward_finish<<<xs, GGLUA_LN_COLS, 0, stream>>>(p, part.get(), slices);
}
