// Fused attention on the CPU: softmax(q·kᵀ·scale [causal]) · v and its
// gradient without the [Tq, Tk] scores in memory, as ggml custom nodes
// that gglua-flash-attn.cu runs on a GPU. A row's scores are made a block
// of keys at a time with an online softmax (the running maximum and sum
// rescale what came before), so memory is O(T·D); the backward recomputes
// the weights from the forward's log-sum-exp, as FlashAttention does.
//
// Layouts (flash_attn.go): q, k, v are f32 with ne (D, T, H, B) and
// contiguous rows (nb0 = 4), any other strides. The forward's dst is one
// run: the output as [B][Tq][H][D] (the heads already side by side, as a
// projection reads them), then the log-sum-exp as [B][H][Tq] f32; the run
// is f32, or bf16 in the bf16 form (the output written in bf16, as
// PyTorch's autocast writes attention's, each f32 of the log-sum-exp in
// two of its elements). The backward's dst is f32: dq [B][Tq][H][D], dk
// and dv [B][Tk][H][D], in a run.
//
// Both work on a block of FA_ROWS queries against a block of FA_KEYS keys
// (a [D][keys] transposed copy of the keys, so that a query's scores are
// vector sums over keys, no reductions), as small products that stay in
// the L1 cache.
//
// With the bf16 flag the values that the GPU's tensor cores read in bf16
// are rounded where it rounds them (q, k, v, dO, the weights before they
// multiply v and dO, dS before it multiplies q and k), the sums in f32:
// the CPU reference of autocast's kernel.
#include <math.h>
#include <stdint.h>

#include "gglua_ops.h"

#define FA_ROWS 16   // queries a block
#define FA_KEYS 64   // keys a block (a multiple of 8: vectors of scores)
#define FA_MAX_D 128 // flash_attn.go refuses wider heads

typedef struct {
    int64_t D, Tq, Tk, H, B;
    float scale;
    int causal, bf16;
} fa_shape;

static fa_shape fa_shape_of(const struct ggml_tensor * dst, void * userdata) {
    const uint64_t code = (uint64_t) (uintptr_t) userdata;
    const struct ggml_tensor * q = dst->src[0];
    const struct ggml_tensor * k = dst->src[1];
    fa_shape s = {q->ne[0], q->ne[1], k->ne[1], q->ne[2], q->ne[3], 0.0f, (int) ((code >> 32) & 1), (int) ((code >> 33) & 1)};
    const uint32_t bits = (uint32_t) code;
    memcpy(&s.scale, &bits, sizeof s.scale);
    return s;
}

// fa_row is row t of head h, batch b of the strided tensor x (f32 unless
// fa_block reads it).
static inline const float * fa_row(const struct ggml_tensor * x, int64_t t, int64_t h, int64_t b) {
    return (const float *) ((const char *) x->data + b * x->nb[3] + h * x->nb[2] + t * x->nb[1]);
}

static inline float fa_round(float x, int bf16) { return bf16 ? gglua_round_bf16(x) : x; }

// fa_lse is where the log-sum-exp lies in a forward's run: after the
// output, whose elements are f32 or bf16 (then the f32s may lie 2 bytes off
// their alignment: read and written with memcpy).
static inline char * fa_lse(const struct ggml_tensor * run, const fa_shape * s) {
    return (char *) run->data + s->B * s->Tq * s->H * s->D * (int64_t) ggml_type_size(run->type);
}

// fa_block copies rows t0..t0+n of head (h, b) of x (f32, or bf16: a
// product's result under autocast) into rows [n][D] (and, if t is not
// NULL, their transpose into t [D][FA_KEYS], zeros past n), rounded to
// bf16 if asked.
static void fa_block(float * rows, float * t, const struct ggml_tensor * x, int64_t t0, int64_t n, int64_t h, int64_t b, const fa_shape * s) {
    for (int64_t j = 0; j < n; j++) {
        const float * src = fa_row(x, t0 + j, h, b);
        if (x->type == GGML_TYPE_BF16) {
            const uint16_t * src16 = (const uint16_t *) src;
            for (int64_t d = 0; d < s->D; d++) {
                const uint32_t u = (uint32_t) src16[d] << 16;
                memcpy(&rows[j * s->D + d], &u, sizeof u);
            }
            continue;
        }
        for (int64_t d = 0; d < s->D; d++) {
            rows[j * s->D + d] = fa_round(src[d], s->bf16);
        }
    }
    if (t == NULL) {
        return;
    }
    for (int64_t d = 0; d < s->D; d++) {
        for (int64_t j = 0; j < FA_KEYS; j++) {
            t[d * FA_KEYS + j] = j < n ? rows[j * s->D + d] : 0.0f;
        }
    }
}

// fa_scores is out[j] = Σ_d a[d]·t[d][j] for the FA_KEYS keys of a block:
// eight vectors of eight sums (GCC's and Clang's vector extension).
// The accumulators are loaded and stored a vector at a time (fa_ld,
// fa_st: through a type that may alias floats at any alignment); a memcpy
// of the whole array kept them on the stack. Macros, not functions: a
// vector passed by value warns (-Wpsabi) where AVX is not enabled.
typedef float fa_v8 __attribute__((vector_size(32)));
typedef float fa_v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define fa_ld(p) (*(const fa_v8u *) (p))
#define fa_st(p, v) (*(fa_v8u *) (p) = (v))

static void fa_scores(float * out, const float * a, const float * t, int64_t D) {
    fa_v8 acc[FA_KEYS / 8];
    for (int l = 0; l < FA_KEYS / 8; l++) {
        acc[l] = (fa_v8) {0};
    }
    for (int64_t d = 0; d < D; d++) {
        const float x = a[d];
        for (int l = 0; l < FA_KEYS / 8; l++) {
            acc[l] += fa_ld(t + d * FA_KEYS + 8 * l) * x;
        }
    }
    for (int l = 0; l < FA_KEYS / 8; l++) {
        fa_st(out + 8 * l, acc[l]);
    }
}

// fa_sum_rows is y[D] += Σ_r c[r·cs]·x[r][D] over n rows: 64 columns of y
// at a time held in eight vectors while the rows stream by.
static void fa_sum_rows(float * y, const float * c, int64_t cs, const float * x, int64_t n, int64_t D) {
    int64_t d0 = 0;
    for (; d0 + 64 <= D; d0 += 64) {
        fa_v8 acc[8];
        for (int l = 0; l < 8; l++) {
            acc[l] = fa_ld(y + d0 + 8 * l);
        }
        for (int64_t r = 0; r < n; r++) {
            const float a = c[r * cs];
            for (int l = 0; l < 8; l++) {
                acc[l] += fa_ld(x + r * D + d0 + 8 * l) * a;
            }
        }
        for (int l = 0; l < 8; l++) {
            fa_st(y + d0 + 8 * l, acc[l]);
        }
    }
    for (int64_t r = 0; r < n; r++) {
        for (int64_t d = d0; d < D; d++) {
            y[d] += c[r * cs] * x[r * D + d];
        }
    }
}

// fa_exp is e^x for the FA_KEYS floats of x (in place), vectorised as
// Cephes's expf: x = n·ln 2 + r, e^r by a polynomial, 2^n into the
// exponent; below -87.3 it is 0 (e^-inf included), above 88.7 +inf, NaN
// stays NaN (libm's expf, one at a time, was most of the forward).
typedef int32_t fa_i8 __attribute__((vector_size(32)));
#define FA_SEL(m, a, b) ((fa_v8) (((fa_i8) (a) & (m)) | ((fa_i8) (b) & ~(m))))

static void fa_exp(float * x) {
    const fa_v8 zero = {0}, one = zero + 1.0f;
    for (int l = 0; l < FA_KEYS / 8; l++) {
        const fa_v8 v = fa_ld(x + 8 * l);
        const fa_i8 nan = v != v, low = v < -87.33654f, high = v > 88.72283f;
        fa_v8 t = FA_SEL(nan | low | high, zero, v);
        const fa_v8 z = t * 1.44269504088896341f + 0.5f; // n = floor(z)
        fa_i8 n = __builtin_convertvector(z, fa_i8);
        n += (fa_i8) (__builtin_convertvector(n, fa_v8) > z); // truncation rounded up below 0: -1
        const fa_v8 nf = __builtin_convertvector(n, fa_v8);
        t = t - nf * 0.693359375f - nf * -2.12194440e-4f;
        fa_v8 p = zero + 1.9875691500e-4f;
        p = p * t + 1.3981999507e-3f;
        p = p * t + 8.3334519073e-3f;
        p = p * t + 4.1665795894e-2f;
        p = p * t + 1.6666665459e-1f;
        p = p * t + 5.0000001201e-1f;
        p = p * t * t + t + one;
        fa_v8 scale;
        const fa_i8 bits = (n + 127) << 23;
        memcpy(&scale, &bits, sizeof scale);
        fa_v8 e = p * scale;
        e = FA_SEL(low, zero, e);
        e = FA_SEL(high, zero + INFINITY, e);
        e = FA_SEL(nan, v, e);
        fa_st(x + 8 * l, e);
    }
}

// fa_keys is how many keys query i attends to.
static inline int64_t fa_keys(const fa_shape * s, int64_t i) {
    return s->causal ? (i + 1 < s->Tk ? i + 1 : s->Tk) : s->Tk;
}

// The forward: blocks of queries (b, h, block) split over the threads.
void gglua_flash_attn_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const fa_shape s = fa_shape_of(dst, userdata);
    const struct ggml_tensor * q = dst->src[0];
    const struct ggml_tensor * k = dst->src[1];
    const struct ggml_tensor * v = dst->src[2];
    char * lse = fa_lse(dst, &s);
    const int64_t D = s.D, nblocks = (s.Tq + FA_ROWS - 1) / FA_ROWS;
    float qs[FA_ROWS * FA_MAX_D], ks[FA_KEYS * FA_MAX_D], kt[FA_MAX_D * FA_KEYS], vs[FA_KEYS * FA_MAX_D];
    float acc[FA_ROWS * FA_MAX_D], m[FA_ROWS], l[FA_ROWS], sc[FA_KEYS];
    int64_t w0, w1;
    gglua_share(s.B * s.H * nblocks, ith, nth, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        const int64_t i0 = (w % nblocks) * FA_ROWS, h = (w / nblocks) % s.H, b = w / (nblocks * s.H);
        const int64_t rows = s.Tq - i0 < FA_ROWS ? s.Tq - i0 : FA_ROWS;
        fa_block(qs, NULL, q, i0, rows, h, b, &s);
        memset(acc, 0, sizeof(float) * rows * D);
        for (int64_t r = 0; r < rows; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        const int64_t kend = fa_keys(&s, i0 + rows - 1);
        for (int64_t j0 = 0; j0 < kend; j0 += FA_KEYS) {
            const int64_t n = kend - j0 < FA_KEYS ? kend - j0 : FA_KEYS;
            fa_block(ks, kt, k, j0, n, h, b, &s);
            fa_block(vs, NULL, v, j0, n, h, b, &s);
            for (int64_t r = 0; r < rows; r++) {
                const int64_t keys = fa_keys(&s, i0 + r) - j0; // of this block, may be <= 0
                if (keys <= 0) {
                    continue;
                }
                const int64_t nk = keys < n ? keys : n;
                fa_scores(sc, qs + r * D, kt, D);
                float bm = -INFINITY;
                for (int64_t j = 0; j < nk; j++) {
                    sc[j] *= s.scale;
                    bm = sc[j] > bm ? sc[j] : bm;
                }
                // The running maximum rescales what came before; a NaN
                // score (which no maximum picks) makes the output NaN,
                // as in PyTorch.
                const float mn = bm > m[r] ? bm : m[r];
                const float alpha = mn == -INFINITY ? 1.0f : expf(m[r] - mn);
                float * o = acc + r * D;
                l[r] *= alpha;
                for (int64_t d = 0; d < D; d++) {
                    o[d] *= alpha;
                }
                for (int64_t j = 0; j < FA_KEYS; j++) { // NaN stays NaN, -inf gives 0
                    sc[j] = j < nk ? sc[j] - (mn == -INFINITY ? 0.0f : mn) : -INFINITY;
                }
                fa_exp(sc);
                for (int64_t j = 0; j < nk; j++) {
                    l[r] += sc[j];
                    sc[j] = fa_round(sc[j], s.bf16);
                }
                fa_sum_rows(o, sc, 1, vs, nk, D);
                m[r] = mn;
            }
        }
        for (int64_t r = 0; r < rows; r++) {
            const int64_t at = ((b * s.Tq + i0 + r) * s.H + h) * D;
            for (int64_t d = 0; d < D; d++) {
                const float o = l[r] > 0.0f ? acc[r * D + d] / l[r] : NAN;
                if (dst->type == GGML_TYPE_BF16) {
                    ((uint16_t *) dst->data)[at + d] = gglua_bf16_bits(o);
                } else {
                    ((float *) dst->data)[at + d] = o;
                }
            }
            const float row_lse = m[r] + logf(l[r]);
            memcpy(lse + sizeof(float) * ((b * s.H + h) * s.Tq + i0 + r), &row_lse, sizeof row_lse);
        }
    }
}

// The backward: a thread takes whole heads (b, h), so that the sums into
// dk and dv, over every query, are its own. For each block of queries and
// block of keys: the weights p = exp(s - lse) and dS = p·(dp - Σ p·dp)
// (the sum is dO·O), then dq += dS·k, dk += dSᵀ·q, dv += pᵀ·dO.
void gglua_flash_attn_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const fa_shape s = fa_shape_of(dst, userdata);
    const struct ggml_tensor * q = dst->src[0];
    const struct ggml_tensor * k = dst->src[1];
    const struct ggml_tensor * v = dst->src[2];
    const struct ggml_tensor * fwd = dst->src[3];
    const struct ggml_tensor * go = dst->src[4];
    const char * lse = fa_lse(fwd, &s);
    const int64_t D = s.D, H = s.H;
    float * dq = (float *) dst->data;
    float * dk = dq + s.B * s.Tq * H * D;
    float * dv = dk + s.B * s.Tk * H * D;
    float qs[FA_ROWS * FA_MAX_D], gs[FA_ROWS * FA_MAX_D], ks[FA_KEYS * FA_MAX_D], kt[FA_MAX_D * FA_KEYS], vs[FA_KEYS * FA_MAX_D], vt[FA_MAX_D * FA_KEYS];
    float pw[FA_ROWS * FA_KEYS], ds[FA_ROWS * FA_KEYS], dp[FA_KEYS], delta[FA_ROWS];
    int64_t p0, p1;
    gglua_share(s.B * H, ith, nth, &p0, &p1);
    for (int64_t pair = p0; pair < p1; pair++) {
        const int64_t h = pair % H, b = pair / H;
        for (int64_t j = 0; j < s.Tk; j++) {
            memset(dk + ((b * s.Tk + j) * H + h) * D, 0, sizeof(float) * D);
            memset(dv + ((b * s.Tk + j) * H + h) * D, 0, sizeof(float) * D);
        }
        for (int64_t i0 = 0; i0 < s.Tq; i0 += FA_ROWS) {
            const int64_t rows = s.Tq - i0 < FA_ROWS ? s.Tq - i0 : FA_ROWS;
            fa_block(qs, NULL, q, i0, rows, h, b, &s);
            for (int64_t r = 0; r < rows; r++) {
                const float * g = fa_row(go, i0 + r, h, b);
                const int64_t o = ((b * s.Tq + i0 + r) * H + h) * D;
                delta[r] = 0.0f;
                for (int64_t d = 0; d < D; d++) {
                    delta[r] += g[d] * gglua_element(fwd, o + d);
                }
                memset(dq + ((b * s.Tq + i0 + r) * H + h) * D, 0, sizeof(float) * D);
            }
            fa_block(gs, NULL, go, i0, rows, h, b, &s);
            const int64_t kend = fa_keys(&s, i0 + rows - 1);
            for (int64_t j0 = 0; j0 < kend; j0 += FA_KEYS) {
                const int64_t n = kend - j0 < FA_KEYS ? kend - j0 : FA_KEYS;
                fa_block(ks, kt, k, j0, n, h, b, &s);
                fa_block(vs, vt, v, j0, n, h, b, &s);
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t keys = fa_keys(&s, i0 + r) - j0;
                    float li;
                    memcpy(&li, lse + sizeof(float) * ((b * H + h) * s.Tq + i0 + r), sizeof li);
                    float * pr = pw + r * FA_KEYS;
                    float * dr = ds + r * FA_KEYS;
                    fa_scores(pr, qs + r * D, kt, D);
                    fa_scores(dp, gs + r * D, vt, D);
                    for (int64_t j = 0; j < FA_KEYS; j++) {
                        pr[j] = j < keys && j < n ? pr[j] * s.scale - li : -INFINITY;
                    }
                    fa_exp(pr);
                    for (int64_t j = 0; j < n; j++) { // a masked key's dS is 0, whatever dp is
                        dr[j] = j < keys ? fa_round(pr[j] * (dp[j] - delta[r]), s.bf16) : 0.0f;
                        pr[j] = fa_round(pr[j], s.bf16);
                    }
                }
                // The sums run over the pairs that attend only: a NaN in a
                // row the forward never read stays out (0·NaN is NaN).
                for (int64_t r = 0; r < rows; r++) { // dq += dS·k
                    const int64_t keys = fa_keys(&s, i0 + r) - j0;
                    fa_sum_rows(dq + ((b * s.Tq + i0 + r) * H + h) * D, ds + r * FA_KEYS, 1, ks, keys < n ? keys : n, D);
                }
                for (int64_t j = 0; j < n; j++) { // dk += dSᵀ·q, dv += pᵀ·dO
                    const int64_t r0 = s.causal && j0 + j > i0 ? j0 + j - i0 : 0; // the first query attending key j0 + j
                    if (r0 >= rows) {
                        continue;
                    }
                    fa_sum_rows(dk + ((b * s.Tk + j0 + j) * H + h) * D, ds + r0 * FA_KEYS + j, FA_KEYS, qs + r0 * D, rows - r0, D);
                    fa_sum_rows(dv + ((b * s.Tk + j0 + j) * H + h) * D, pw + r0 * FA_KEYS + j, FA_KEYS, gs + r0 * D, rows - r0, D);
                }
            }
            for (int64_t r = 0; r < rows; r++) {
                float * dqr = dq + ((b * s.Tq + i0 + r) * H + h) * D;
                for (int64_t d = 0; d < D; d++) {
                    dqr[d] *= s.scale;
                }
            }
        }
        for (int64_t j = 0; j < s.Tk; j++) {
            float * dkj = dk + ((b * s.Tk + j) * H + h) * D;
            for (int64_t d = 0; d < D; d++) {
                dkj[d] *= s.scale;
            }
        }
    }
}

struct ggml_tensor * gglua_flash_attn_node(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                           struct ggml_tensor * v, uint64_t code) {
    struct ggml_tensor * args[3] = {q, k, v};
    const int bf16 = (code >> 33) & 1; // the log-sum-exp's f32s take two bf16 elements each
    const int64_t n = q->ne[0] * q->ne[1] * q->ne[2] * q->ne[3] + (bf16 ? 2 : 1) * q->ne[1] * q->ne[2] * q->ne[3];
    struct ggml_tensor * t = ggml_custom_4d(ctx, bf16 ? GGML_TYPE_BF16 : GGML_TYPE_F32, n, 1, 1, 1, args, 3, gglua_flash_attn_f32, -1,
                                            (void *) (uintptr_t) code);
    ggml_set_name(t, "flash_attn");
    return t;
}

struct ggml_tensor * gglua_flash_attn_back_node(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                                struct ggml_tensor * v, struct ggml_tensor * fwd, struct ggml_tensor * go, uint64_t code) {
    struct ggml_tensor * args[5] = {q, k, v, fwd, go};
    const int64_t n = q->ne[0] * q->ne[1] * q->ne[2] * q->ne[3] + 2 * k->ne[0] * k->ne[1] * k->ne[2] * k->ne[3];
    struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, n, 1, 1, 1, args, 5, gglua_flash_attn_back_f32, -1, (void *) (uintptr_t) code);
    ggml_set_name(t, "flash_attn_back");
    return t;
}
