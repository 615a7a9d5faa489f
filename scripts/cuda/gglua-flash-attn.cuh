// gglua-flash-attn.cuh - fused attention on the tensor cores, forward and
// backward, as FlashAttention-2 computes it: softmax(q·kᵀ·scale, causal)·v
// for 128 queries at a time against tiles of 64 keys, the
// softmax online (a running maximum and sum per row rescale what came
// before), so the [Tq, Tk] scores are never in memory; the backward
// remakes the weights from the forward's log-sum-exp. The CPU's form, and
// the layouts, are ggmlcgo/flash_attn.c's; gglua-kernels.cu matches the
// nodes and calls gglua_fa_forward and gglua_fa_backward.
//
// Products read bf16 (q, k, v, dO rounded as a tile is loaded, the weights
// and dS rounded before they multiply) and sum in f32, with the softmax,
// its sums and the log-sum-exp in f32: autocast's attention, as PyTorch's
// flash kernel under bf16 autocast. A block owns 128 rows (queries, or
// the backward's keys), 16 to each of its 8 warps, and streams tiles of 64
// of the other side through shared memory; the products are mma.sync
// m16n8k16 tiles (sm_80 and up) fed by ldmatrix, and scores, weights and
// sums stay in the fragments' registers. (WMMA's fragments, loaded with
// plain shared loads, measured 18-25% slower on an H200.)
// No atomics: the backward sums dk and dv in one kernel (a block per key
// tile, looping over the queries) and dq in another (a block per query
// tile), so results do not depend on scheduling.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

// gglua_fa_rows is an f32 or bf16 tensor of ne (D, T, H, B) with packed
// rows: row (t, h, b) at data + b*nb3 + h*nb2 + t*nb1.
struct gglua_fa_rows {
    const char * data;
    int64_t nb1, nb2, nb3;
    bool vec;  // rows aligned to four elements: one vector load of four
    bool bf16; // bf16 elements (a product's result under autocast), else f32
};

struct gglua_fa_params {
    gglua_fa_rows q, k, v, go; // go: the output's gradient (backward)
    __nv_bfloat16 * out;       // [B][Tq][H][D] (the backward reads it)
    float * lse;               // [B][H][Tq]
    float * dq, * dk, * dv;    // [B][Tq][H][D], [B][Tk][H][D] twice
    float * delta;             // [B][H][Tq] scratch: Σ dO·O per row
    int Tq, Tk, H, B;
    float scale;
    bool causal;
};

#define GGLUA_FA_TILE 64     // rows of the tiles a block streams through
#define GGLUA_FA_OWN 128     // rows a block owns: 8 warps of 16
#define GGLUA_FA_THREADS 256
// The backward's score blocks of 16 live at once: fewer (2, 1) keep
// fewer registers (210, 174 for bwd_kv at D = 64) but measured slower on
// an H200 than the whole 64-row tile (248, no spills).
#define GGLUA_FA_BWD_BLOCKS 4

namespace gglua_fa {

// A 16x16 block of f32 sums, as two m16n8 tiles of mma.sync: x[0..3]
// columns 0-7, x[4..7] columns 8-15 (frow, fcol below).
struct acc_t {
    float x[8];
};
// A 16x16 bf16 matrix_a operand of m16n8k16, its elements in acc_t's
// order, so that r[i] packs x[2i] and x[2i + 1].
struct a_t {
    union {
        __nv_bfloat16 x[8];
        uint32_t r[4];
    };
};
__device__ __forceinline__ void zero(acc_t & a) {
    for (int i = 0; i < 8; i++) {
        a.x[i] = 0.0f;
    }
}

// ldsm loads four 8x8 bf16 matrices from shared memory, each lane giving
// one row's address (ldmatrix: a thread gets row lane/4, columns
// 2*(lane%4) and the next of each; with trans, of each transposed).
template <bool trans>
__device__ __forceinline__ void ldsm(uint32_t * r, const __nv_bfloat16 * row) {
    const uint32_t at = (uint32_t) __cvta_generic_to_shared(row);
    if (trans) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
    }
}

// mma is c += a·b for one m16n8k16 tile (b: two registers of k pairs).
__device__ __forceinline__ void mma(float * c, const uint32_t * a, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// load4 is the four elements from c of a row of x, in f32 (exact for bf16).
__device__ __forceinline__ float4 load4(const gglua_fa_rows & x, const char * row, int c) {
    if (x.bf16) {
        const __nv_bfloat16 * s = (const __nv_bfloat16 *) row + c;
        if (x.vec) {
            const uint2 u = *(const uint2 *) s;
            const float2 lo = __bfloat1622float2(*(const __nv_bfloat162 *) &u.x);
            const float2 hi = __bfloat1622float2(*(const __nv_bfloat162 *) &u.y);
            return make_float4(lo.x, lo.y, hi.x, hi.y);
        }
        return make_float4(__bfloat162float(s[0]), __bfloat162float(s[1]), __bfloat162float(s[2]), __bfloat162float(s[3]));
    }
    const float * s = (const float *) row + c;
    return x.vec ? *(const float4 *) s : make_float4(s[0], s[1], s[2], s[3]);
}

// load_tile rounds rows t0..t0+R of head (h, b) of x into an [R][D + 8]
// bf16 tile, zeros past T.
template <int D, int R>
__device__ __forceinline__ void load_tile(__nv_bfloat16 * dst, const gglua_fa_rows & x, int h, int b, int t0, int T) {
    const char * base = x.data + (int64_t) b * x.nb3 + (int64_t) h * x.nb2;
    constexpr int C4 = D / 4;
    for (int i = threadIdx.x; i < R * C4; i += GGLUA_FA_THREADS) {
        const int r = i / C4, c = (i % C4) * 4;
        float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t0 + r < T) {
            f = load4(x, base + (int64_t) (t0 + r) * x.nb1, c);
        }
        __nv_bfloat162 * d2 = (__nv_bfloat162 *) (dst + r * (D + 8) + c);
        d2[0] = __floats2bfloat162_rn(f.x, f.y);
        d2[1] = __floats2bfloat162_rn(f.z, f.w);
    }
}

// A streamed tile ([64][D]) goes through registers: fetch issues the
// global loads of the next tile before the current one is computed, put
// rounds them into shared memory after, so the loads' latency hides
// behind the tensor cores' work.
template <int D> struct staged {
    float4 v[GGLUA_FA_TILE * D / 4 / GGLUA_FA_THREADS];
};

template <int D>
__device__ __forceinline__ void fetch(staged<D> & r, const gglua_fa_rows & x, int h, int b, int t0, int T) {
    const char * base = x.data + (int64_t) b * x.nb3 + (int64_t) h * x.nb2;
    constexpr int C4 = D / 4;
    for (int k = 0; k < GGLUA_FA_TILE * C4 / GGLUA_FA_THREADS; k++) {
        const int i = threadIdx.x + k * GGLUA_FA_THREADS, row = i / C4, c = (i % C4) * 4;
        float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t0 + row < T) {
            f = load4(x, base + (int64_t) (t0 + row) * x.nb1, c);
        }
        r.v[k] = f;
    }
}

template <int D>
__device__ __forceinline__ void put(__nv_bfloat16 * dst, const staged<D> & r) {
    constexpr int C4 = D / 4;
    for (int k = 0; k < GGLUA_FA_TILE * C4 / GGLUA_FA_THREADS; k++) {
        const int i = threadIdx.x + k * GGLUA_FA_THREADS, row = i / C4, c = (i % C4) * 4;
        __nv_bfloat162 * d2 = (__nv_bfloat162 *) (dst + row * (D + 8) + c);
        d2[0] = __floats2bfloat162_rn(r.v[k].x, r.v[k].y);
        d2[1] = __floats2bfloat162_rn(r.v[k].z, r.v[k].w);
    }
}

// The fragments' elements: a 16x16 block is two m16n8k16 mma tiles, so
// element i of a thread's accumulator lies at row
// frow(i), column fcol(i) of the 16x16 block, and element i of a bf16
// row-major matrix_a fragment at the same place: a block of scores becomes
// the weights that multiply v without leaving the registers, as
// FlashAttention-2 keeps them (flash_attn_check.cu checks this on the GPU).
__device__ __forceinline__ int frow(int i) { return (threadIdx.x % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int fcol(int i) { return (threadIdx.x % 4) * 2 + i % 2 + 8 * (i / 4); }

// scores is s[n] = a · bᵀ over D for the warp's 16 rows a (matrix_a
// fragments, D/16 of them) and N*16 rows of tile b: 16xN*16 in N blocks.
// weighted is acc[n] += w · x for the warp's 16xK*16 weights w (K
// matrix_a fragments, a block of 16 keys each) and the [K*16][D] tile x.
// rows_of loads the warp's 16 rows of tile t as D/16 matrix_a fragments.
// b's rows are the products' n and D their k, as mma's col operand wants
// them: the four matrices of a 16x16 block are (rows 0-7, k 0-7), (0-7,
// 8-15), (8-15, 0-7), (8-15, 8-15), the first two one n8 tile's b.
template <int D, int N = 4>
__device__ __forceinline__ void scores(acc_t * s, const a_t * a, const __nv_bfloat16 * b) {
    const int l = threadIdx.x % 32;
    const __nv_bfloat16 * row = b + (l % 8 + (l / 16) * 8) * (D + 8) + ((l / 8) % 2) * 8;
    for (int n = 0; n < N; n++) {
        zero(s[n]);
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t r[4];
            ldsm<false>(r, row + n * 16 * (D + 8) + kk * 16);
            mma(s[n].x, a[kk].r, r[0], r[1]);
            mma(s[n].x + 4, a[kk].r, r[2], r[3]);
        }
    }
}
// x's rows are the products' k: transposed loads, the matrices (k 0-7,
// n 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
template <int D, int K = 4>
__device__ __forceinline__ void weighted(acc_t * acc, const a_t * w, const __nv_bfloat16 * x) {
    const int l = threadIdx.x % 32;
    const __nv_bfloat16 * row = x + (l % 8 + ((l / 8) % 2) * 8) * (D + 8) + (l / 16) * 8;
    for (int n = 0; n < D / 16; n++) {
        for (int kk = 0; kk < K; kk++) {
            uint32_t r[4];
            ldsm<true>(r, row + kk * 16 * (D + 8) + n * 16);
            mma(acc[n].x, w[kk].r, r[0], r[1]);
            mma(acc[n].x + 4, w[kk].r, r[2], r[3]);
        }
    }
}
// The matrices (rows 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15,
// 8-15): matrix_a's registers in order.
template <int D>
__device__ __forceinline__ void rows_of(a_t * a, const __nv_bfloat16 * t) {
    const int l = threadIdx.x % 32;
    for (int kk = 0; kk < D / 16; kk++) {
        ldsm<false>(a[kk].r, t + (l % 16) * (D + 8) + kk * 16 + (l / 16) * 8);
    }
}

// pair writes two neighbouring elements.
__device__ __forceinline__ void pair(float * at, float a, float b) { *(float2 *) at = make_float2(a, b); }
__device__ __forceinline__ void pair(__nv_bfloat16 * at, float a, float b) { *(__nv_bfloat162 *) at = __floats2bfloat162_rn(a, b); }

// store_rows writes the warp's 16 rows of acc (times scale), rows t0.. of
// head (h, b) of dst ([B][T][H][D], f32 or bf16), two columns a store.
template <int D, typename T_out>
__device__ __forceinline__ void store_rows(T_out * dst, const acc_t * acc, float scale, int t0, int T, int H, int h, int b) {
    for (int n = 0; n < D / 16; n++) {
        for (int i = 0; i < 8; i += 2) {
            const int t = t0 + frow(i);
            if (t < T) {
                pair(dst + (((int64_t) b * T + t) * H + h) * D + n * 16 + fcol(i), acc[n].x[i] * scale, acc[n].x[i + 1] * scale);
            }
        }
    }
}

// attends reports whether query qi attends to key kj.
__device__ __forceinline__ bool attends(const gglua_fa_params & p, int qi, int kj) {
    return qi < p.Tq && kj < p.Tk && !(p.causal && kj > qi);
}

// row_max and row_sum reduce over the four lanes that hold a row.
__device__ __forceinline__ float row_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float row_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <int D> constexpr size_t fwd_smem() { return (GGLUA_FA_OWN + 2 * GGLUA_FA_TILE) * (D + 8) * 2; }
template <int D> constexpr size_t bwd_smem() { return (2 * GGLUA_FA_OWN + 2 * GGLUA_FA_TILE) * (D + 8) * 2 + 2 * GGLUA_FA_OWN * 4; }

// fwd: a block per (128 queries, head, batch). A thread holds two rows of
// its warp's 16 (frow(0) and frow(2)): their running maximum m and sum l.
template <int D>
__global__ void __launch_bounds__(GGLUA_FA_THREADS, 2) fwd(const gglua_fa_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr int LDH = D + 8;
    __nv_bfloat16 * Qs = (__nv_bfloat16 *) smem;
    __nv_bfloat16 * Ks = Qs + GGLUA_FA_OWN * LDH;
    __nv_bfloat16 * Vs = Ks + GGLUA_FA_TILE * LDH;
    const int w = threadIdx.x / 32;
    const int q0 = blockIdx.x * GGLUA_FA_OWN, h = blockIdx.y, b = blockIdx.z;
    load_tile<D, GGLUA_FA_OWN>(Qs, p.q, h, b, q0, p.Tq);
    __syncthreads();
    a_t qa[D / 16];
    rows_of<D>(qa, Qs + w * 16 * LDH);
    acc_t o[D / 16];
    for (int n = 0; n < D / 16; n++) {
        zero(o[n]);
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float scale2 = p.scale * 1.44269504088896341f; // log2(e)
    const int kend = p.causal ? min(p.Tk, q0 + GGLUA_FA_OWN) : p.Tk;
    staged<D> kr, vr;
    fetch<D>(kr, p.k, h, b, 0, p.Tk);
    fetch<D>(vr, p.v, h, b, 0, p.Tk);
    for (int k0 = 0; k0 < kend; k0 += GGLUA_FA_TILE) {
        __syncthreads(); // every warp is done with the last tile
        put<D>(Ks, kr);
        put<D>(Vs, vr);
        __syncthreads();
        if (k0 + GGLUA_FA_TILE < kend) {
            fetch<D>(kr, p.k, h, b, k0 + GGLUA_FA_TILE, p.Tk);
            fetch<D>(vr, p.v, h, b, k0 + GGLUA_FA_TILE, p.Tk);
        }
        if (p.causal && k0 > q0 + w * 16 + 15) {
            continue; // every key of the tile is after the warp's queries
        }
        acc_t s[4];
        scores<D>(s, qa, Ks);
        // Scores in log2 units (exp2 is the hardware's); the masks only
        // on tiles that cross the causal diagonal or an end.
        const bool inside = k0 + GGLUA_FA_TILE <= p.Tk && q0 + w * 16 + 16 <= p.Tq && (!p.causal || k0 + GGLUA_FA_TILE - 1 <= q0 + w * 16);
        float mx[2] = {-INFINITY, -INFINITY};
        for (int n = 0; n < 4; n++) {
            for (int i = 0; i < 8; i++) {
                float x = s[n].x[i] * scale2;
                if (!inside) {
                    const int qi = q0 + w * 16 + frow(i);
                    x = attends(p, qi < p.Tq ? qi : p.Tq - 1, k0 + n * 16 + fcol(i)) ? x : -INFINITY;
                }
                s[n].x[i] = x;
                mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], x);
            }
        }
        float alpha[2], sum[2] = {0.0f, 0.0f};
        for (int r = 0; r < 2; r++) {
            const float mn = fmaxf(m[r], row_max(mx[r]));
            alpha[r] = mn == -INFINITY ? 1.0f : exp2f(m[r] - mn);
            m[r] = mn;
        }
        a_t pa[4];
        for (int n = 0; n < 4; n++) {
            for (int i = 0; i < 8; i++) {
                const int r = (i / 2) % 2;
                const float e = exp2f(s[n].x[i] - (m[r] == -INFINITY ? 0.0f : m[r])); // NaN stays NaN
                sum[r] += e;
                pa[n].x[i] = __float2bfloat16_rn(e);
            }
        }
        for (int r = 0; r < 2; r++) {
            l[r] = l[r] * alpha[r] + row_sum(sum[r]);
        }
        for (int n = 0; n < D / 16; n++) {
            for (int i = 0; i < 8; i++) {
                o[n].x[i] *= alpha[(i / 2) % 2];
            }
        }
        weighted<D>(o, pa, Vs);
    }
    // Divide by the sums (0: no key, NaN as in PyTorch) and write.
    for (int n = 0; n < D / 16; n++) {
        for (int i = 0; i < 8; i++) {
            const float li = l[(i / 2) % 2];
            o[n].x[i] = li > 0.0f ? o[n].x[i] / li : NAN;
        }
    }
    store_rows<D>(p.out, o, 1.0f, q0 + w * 16, p.Tq, p.H, h, b);
    if (threadIdx.x % 4 == 0) {
        for (int r = 0; r < 2; r++) {
            const int qi = q0 + w * 16 + frow(2 * r);
            if (qi < p.Tq) {
                p.lse[((int64_t) b * p.H + h) * p.Tq + qi] = m[r] * 0.693147180559945309f + logf(l[r]);
            }
        }
    }
#endif
}

// delta: Σ_d dO·O for every row, a warp each.
template <int D>
__global__ void delta(const gglua_fa_params p) {
    const int64_t row = (int64_t) blockIdx.x * 4 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= (int64_t) p.B * p.H * p.Tq) {
        return;
    }
    const int t = (int) (row % p.Tq), h = (int) ((row / p.Tq) % p.H), b = (int) (row / ((int64_t) p.Tq * p.H));
    const float * g = (const float *) (p.go.data + (int64_t) b * p.go.nb3 + (int64_t) h * p.go.nb2 + (int64_t) t * p.go.nb1);
    const __nv_bfloat16 * o = p.out + (((int64_t) b * p.Tq + t) * p.H + h) * D;
    float s = 0.0f;
    for (int d = lane; d < D; d += 32) {
        s += g[d] * __bfloat162float(o[d]);
    }
    for (int off = 16; off > 0; off /= 2) {
        s += __shfl_xor_sync(0xffffffffu, s, off);
    }
    if (lane == 0) {
        p.delta[((int64_t) b * p.H + h) * p.Tq + t] = s;
    }
}

// load_rows copies the log-sum-exp (in log2 units) and delta of queries
// q0.. into ls, dl.
__device__ __forceinline__ void load_rows(float * ls, float * dl, const gglua_fa_params & p, int h, int b, int q0, int n) {
    for (int i = threadIdx.x; i < n; i += GGLUA_FA_THREADS) {
        const int64_t at = ((int64_t) b * p.H + h) * p.Tq + q0 + i;
        ls[i] = q0 + i < p.Tq ? p.lse[at] * 1.44269504088896341f : 0.0f;
        dl[i] = q0 + i < p.Tq ? p.delta[at] : 0.0f;
    }
}

// bwd_kv: dk and dv for a block's 128 keys (16 a warp), over every query.
// The warp's scores are transposed (keys by queries: Sᵀ = k·qᵀ), so that
// the weights Pᵀ and dSᵀ are the matrix_a operands of dv += Pᵀ·dO and
// dk += dSᵀ·q straight from the registers.
template <int D>
__global__ void __launch_bounds__(GGLUA_FA_THREADS) bwd_kv(const gglua_fa_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr int LDH = D + 8;
    __nv_bfloat16 * Ks = (__nv_bfloat16 *) smem;
    __nv_bfloat16 * Vs = Ks + GGLUA_FA_OWN * LDH;
    __nv_bfloat16 * Qs = Vs + GGLUA_FA_OWN * LDH;
    __nv_bfloat16 * Gs = Qs + GGLUA_FA_TILE * LDH;
    float * Ls = (float *) (Gs + GGLUA_FA_TILE * LDH);
    float * Dl = Ls + GGLUA_FA_TILE;
    const int w = threadIdx.x / 32;
    const int k0 = blockIdx.x * GGLUA_FA_OWN, h = blockIdx.y, b = blockIdx.z;
    const float scale2 = p.scale * 1.44269504088896341f;
    load_tile<D, GGLUA_FA_OWN>(Ks, p.k, h, b, k0, p.Tk);
    load_tile<D, GGLUA_FA_OWN>(Vs, p.v, h, b, k0, p.Tk);
    __syncthreads();
    a_t ka[D / 16], va[D / 16];
    rows_of<D>(ka, Ks + w * 16 * LDH);
    rows_of<D>(va, Vs + w * 16 * LDH);
    acc_t dk[D / 16], dv[D / 16];
    for (int n = 0; n < D / 16; n++) {
        zero(dk[n]);
        zero(dv[n]);
    }
    const int qstart = p.causal ? k0 : 0;
    staged<D> qr, gr;
    fetch<D>(qr, p.q, h, b, qstart, p.Tq);
    fetch<D>(gr, p.go, h, b, qstart, p.Tq);
    for (int q0 = qstart; q0 < p.Tq; q0 += GGLUA_FA_TILE) {
        __syncthreads();
        put<D>(Qs, qr);
        put<D>(Gs, gr);
        load_rows(Ls, Dl, p, h, b, q0, GGLUA_FA_TILE);
        __syncthreads();
        if (q0 + GGLUA_FA_TILE < p.Tq) {
            fetch<D>(qr, p.q, h, b, q0 + GGLUA_FA_TILE, p.Tq);
            fetch<D>(gr, p.go, h, b, q0 + GGLUA_FA_TILE, p.Tq);
        }
        if (p.causal && k0 + w * 16 > q0 + GGLUA_FA_TILE - 1) {
            continue; // every query of the tile is before the warp's keys
        }
        // The tile's queries in sub-blocks of 16*NB: fewer live scores
        // (registers) at a time, the same products.
        constexpr int NB = GGLUA_FA_BWD_BLOCKS;
        const bool inside = q0 + GGLUA_FA_TILE <= p.Tq && k0 + w * 16 + 16 <= p.Tk && (!p.causal || k0 + w * 16 + 15 <= q0);
        for (int j0 = 0; j0 < GGLUA_FA_TILE; j0 += 16 * NB) {
            if (p.causal && k0 + w * 16 > q0 + j0 + 16 * NB - 1) {
                continue;
            }
            acc_t s[NB], dp[NB];
            scores<D, NB>(s, ka, Qs + j0 * LDH);  // Sᵀ
            scores<D, NB>(dp, va, Gs + j0 * LDH); // dPᵀ = v·dOᵀ
            a_t pa[NB], sa[NB];
            for (int n = 0; n < NB; n++) {
                for (int i = 0; i < 8; i++) {
                    const int j = j0 + n * 16 + fcol(i); // the query, in the tile
                    const bool a = inside || attends(p, q0 + j, k0 + w * 16 + frow(i));
                    const float e = a ? exp2f(s[n].x[i] * scale2 - Ls[j]) : 0.0f;
                    pa[n].x[i] = __float2bfloat16_rn(e);
                    sa[n].x[i] = __float2bfloat16_rn(a ? e * (dp[n].x[i] - Dl[j]) : 0.0f); // masked: 0, whatever dP is
                }
            }
            weighted<D, NB>(dv, pa, Gs + j0 * LDH); // dv += Pᵀ·dO
            weighted<D, NB>(dk, sa, Qs + j0 * LDH); // dk += dSᵀ·q
        }
    }
    store_rows<D>(p.dk, dk, p.scale, k0 + w * 16, p.Tk, p.H, h, b);
    store_rows<D>(p.dv, dv, 1.0f, k0 + w * 16, p.Tk, p.H, h, b);
#endif
}

// bwd_q: dq for a block's 128 queries (16 a warp), over their keys.
template <int D>
__global__ void __launch_bounds__(GGLUA_FA_THREADS) bwd_q(const gglua_fa_params p) {
#if __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr int LDH = D + 8;
    __nv_bfloat16 * Qs = (__nv_bfloat16 *) smem;
    __nv_bfloat16 * Gs = Qs + GGLUA_FA_OWN * LDH;
    __nv_bfloat16 * Ks = Gs + GGLUA_FA_OWN * LDH;
    __nv_bfloat16 * Vs = Ks + GGLUA_FA_TILE * LDH;
    float * Ls = (float *) (Vs + GGLUA_FA_TILE * LDH);
    float * Dl = Ls + GGLUA_FA_OWN;
    const int w = threadIdx.x / 32;
    const int q0 = blockIdx.x * GGLUA_FA_OWN, h = blockIdx.y, b = blockIdx.z;
    const float scale2 = p.scale * 1.44269504088896341f;
    load_tile<D, GGLUA_FA_OWN>(Qs, p.q, h, b, q0, p.Tq);
    load_tile<D, GGLUA_FA_OWN>(Gs, p.go, h, b, q0, p.Tq);
    load_rows(Ls, Dl, p, h, b, q0, GGLUA_FA_OWN);
    __syncthreads();
    a_t qa[D / 16], ga[D / 16];
    rows_of<D>(qa, Qs + w * 16 * LDH);
    rows_of<D>(ga, Gs + w * 16 * LDH);
    float li[2], di[2];
    for (int r = 0; r < 2; r++) {
        li[r] = Ls[w * 16 + frow(2 * r)];
        di[r] = Dl[w * 16 + frow(2 * r)];
    }
    acc_t dq[D / 16];
    for (int n = 0; n < D / 16; n++) {
        zero(dq[n]);
    }
    const int kend = p.causal ? min(p.Tk, q0 + GGLUA_FA_OWN) : p.Tk;
    staged<D> kr, vr;
    fetch<D>(kr, p.k, h, b, 0, p.Tk);
    fetch<D>(vr, p.v, h, b, 0, p.Tk);
    for (int k0 = 0; k0 < kend; k0 += GGLUA_FA_TILE) {
        __syncthreads();
        put<D>(Ks, kr);
        put<D>(Vs, vr);
        __syncthreads();
        if (k0 + GGLUA_FA_TILE < kend) {
            fetch<D>(kr, p.k, h, b, k0 + GGLUA_FA_TILE, p.Tk);
            fetch<D>(vr, p.v, h, b, k0 + GGLUA_FA_TILE, p.Tk);
        }
        if (p.causal && k0 > q0 + w * 16 + 15) {
            continue;
        }
        constexpr int NB = GGLUA_FA_BWD_BLOCKS;
        const bool inside = k0 + GGLUA_FA_TILE <= p.Tk && q0 + w * 16 + 16 <= p.Tq && (!p.causal || k0 + GGLUA_FA_TILE - 1 <= q0 + w * 16);
        for (int j0 = 0; j0 < GGLUA_FA_TILE; j0 += 16 * NB) {
            if (p.causal && k0 + j0 > q0 + w * 16 + 15) {
                continue;
            }
            acc_t s[NB], dp[NB];
            scores<D, NB>(s, qa, Ks + j0 * LDH);  // S = q·kᵀ
            scores<D, NB>(dp, ga, Vs + j0 * LDH); // dP = dO·vᵀ
            a_t sa[NB];
            for (int n = 0; n < NB; n++) {
                for (int i = 0; i < 8; i++) {
                    const int r = (i / 2) % 2;
                    const bool a = inside || attends(p, q0 + w * 16 + frow(i), k0 + j0 + n * 16 + fcol(i));
                    sa[n].x[i] = __float2bfloat16_rn(a ? exp2f(s[n].x[i] * scale2 - li[r]) * (dp[n].x[i] - di[r]) : 0.0f);
                }
            }
            weighted<D, NB>(dq, sa, Ks + j0 * LDH); // dq += dS·k
        }
    }
    store_rows<D>(p.dq, dq, p.scale, q0 + w * 16, p.Tq, p.H, h, b);
#endif
}

template <int D> static void raise_limits() {
    cudaFuncSetAttribute(fwd<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) fwd_smem<D>());
    cudaFuncSetAttribute(bwd_kv<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bwd_smem<D>());
    cudaFuncSetAttribute(bwd_q<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bwd_smem<D>());
    // The largest shared-memory carveout, so that two forward blocks (at
    // most 128 registers a thread: __launch_bounds__) fit on an SM.
    cudaFuncSetAttribute(fwd<D>, cudaFuncAttributePreferredSharedMemoryCarveout, (int) cudaSharedmemCarveoutMaxShared);
    cudaFuncSetAttribute(bwd_kv<D>, cudaFuncAttributePreferredSharedMemoryCarveout, (int) cudaSharedmemCarveoutMaxShared);
    cudaFuncSetAttribute(bwd_q<D>, cudaFuncAttributePreferredSharedMemoryCarveout, (int) cudaSharedmemCarveoutMaxShared);
}

template <int D>
static void forward(const gglua_fa_params & p, cudaStream_t stream) {
    const dim3 grid((unsigned) ((p.Tq + GGLUA_FA_OWN - 1) / GGLUA_FA_OWN), (unsigned) p.H, (unsigned) p.B);
    fwd<D><<<grid, GGLUA_FA_THREADS, fwd_smem<D>(), stream>>>(p);
}

template <int D>
static void backward(const gglua_fa_params & p, cudaStream_t stream) {
    const int64_t rows = (int64_t) p.B * p.H * p.Tq;
    delta<D><<<(unsigned) ((rows + 3) / 4), 128, 0, stream>>>(p); // 4 warps, a row each
    const dim3 kv((unsigned) ((p.Tk + GGLUA_FA_OWN - 1) / GGLUA_FA_OWN), (unsigned) p.H, (unsigned) p.B);
    bwd_kv<D><<<kv, GGLUA_FA_THREADS, bwd_smem<D>(), stream>>>(p);
    const dim3 q((unsigned) ((p.Tq + GGLUA_FA_OWN - 1) / GGLUA_FA_OWN), (unsigned) p.H, (unsigned) p.B);
    bwd_q<D><<<q, GGLUA_FA_THREADS, bwd_smem<D>(), stream>>>(p);
}

} // namespace gglua_fa

// gglua_fa_head_dim reports whether the kernels take heads of d dims
// (ggmlcgo's FlashDeviceHeadDim).
static inline bool gglua_fa_head_dim(int64_t d) { return d == 16 || d == 32 || d == 64 || d == 128; }

// gglua_fa_raise_limits lets the kernels use more than the default 48 KiB
// of shared memory on the current device, once a device (as ggml's own
// kernels do): gglua-kernels.cu calls it before every launch, with the
// node's device current.
static inline void gglua_fa_raise_limits() {
    static bool raised[64] = {false}; // a device's function attributes are its own
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64 || raised[dev]) {
        return;
    }
    gglua_fa::raise_limits<16>();
    gglua_fa::raise_limits<32>();
    gglua_fa::raise_limits<64>();
    gglua_fa::raise_limits<128>();
    raised[dev] = true;
}

// gglua_fa_smem is the shared memory a block of the kernels for heads of
// d dims needs (the device must allow a block that much).
static inline size_t gglua_fa_smem(int64_t d) {
    switch (d) {
        case 16: return gglua_fa::bwd_smem<16>();
        case 32: return gglua_fa::bwd_smem<32>();
        case 64: return gglua_fa::bwd_smem<64>();
        default: return gglua_fa::bwd_smem<128>();
    }
}

// gglua_fa_forward fills p.out (bf16, as PyTorch's autocast writes it) and
// p.lse from p.q, p.k, p.v;
// gglua_fa_backward fills p.dq, p.dk and p.dv (p.delta: B*H*Tq floats of
// scratch) from those, p.out, p.lse and p.go.
static inline void gglua_fa_forward(int d, const gglua_fa_params & p, cudaStream_t stream) {
    switch (d) {
        case 16: gglua_fa::forward<16>(p, stream); break;
        case 32: gglua_fa::forward<32>(p, stream); break;
        case 64: gglua_fa::forward<64>(p, stream); break;
        case 128: gglua_fa::forward<128>(p, stream); break;
    }
}

static inline void gglua_fa_backward(int d, const gglua_fa_params & p, cudaStream_t stream) {
    switch (d) {
        case 16: gglua_fa::backward<16>(p, stream); break;
        case 32: gglua_fa::backward<32>(p, stream); break;
        case 64: gglua_fa::backward<64>(p, stream); break;
        case 128: gglua_fa::backward<128>(p, stream); break;
    }
}
