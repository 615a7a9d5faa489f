// layer_norm.c - PyTorch's layer_norm over the last dim as two fused
// nodes, the CPU forms of what gglua-kernels.cu runs on a GPU. The
// forward writes each row's mean and 1/sd beside its output; the
// backward remakes x̂ from them, so a step holds no centred or normalised
// copy of x. Layouts (one f32 run each, rows of n):
//   layer_norm       y [rows][n], then mean [rows], then rstd [rows]
//   layer_norm_back  dx [rows][n], then dw [n], then db [n]
// userdata: eps's f32 bits, bit 32 set with a weight, bit 33 with a bias;
// the forward's operands are x, then w and b where present, the
// backward's g, x, the statistics (mean [rows], then rstd [rows]: a copy
// of the forward's, so that the tape need not keep its y), then w where
// present.
#include <math.h>

#include "gglua_ops.h"

static inline float gglua_ln_eps(void * userdata) {
    const uint32_t bits = (uint32_t) (uintptr_t) userdata;
    float eps;
    memcpy(&eps, &bits, sizeof eps);
    return eps;
}

static inline int gglua_ln_has(void * userdata, int bit) { return (int) (((uint64_t) (uintptr_t) userdata >> bit) & 1); }

void gglua_layer_norm_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * x = dst->src[0];
    const int hw = gglua_ln_has(userdata, 32), hb = gglua_ln_has(userdata, 33);
    const float * w = hw ? (const float *) dst->src[1]->data : NULL;
    const float * b = hb ? (const float *) dst->src[1 + hw]->data : NULL;
    const float eps = gglua_ln_eps(userdata);
    const int64_t n = x->ne[0], rows = ggml_nrows(x);
    float * y = (float *) dst->data;
    float * mean = y + rows * n;
    float * rstd = mean + rows;
    int64_t r0, r1;
    gglua_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float * xr = (const float *) x->data + r * n;
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) {
            s += xr[i];
        }
        const float m = (float) (s / (double) n);
        double v = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const double d = (double) (xr[i] - m);
            v += d * d;
        }
        const float rs = 1.0f / sqrtf((float) (v / (double) n) + eps);
        float * yr = y + r * n;
        for (int64_t i = 0; i < n; i++) {
            float o = (xr[i] - m) * rs;
            if (w) {
                o *= w[i];
            }
            if (b) {
                o += b[i];
            }
            yr[i] = o;
        }
        mean[r] = m;
        rstd[r] = rs;
    }
}

// dx = rstd · (ĝ - mean(ĝ) - x̂ · mean(ĝ · x̂)) with ĝ = g · w; dw = Σ g · x̂
// and db = Σ g over the rows, each thread summing its columns row by row.
void gglua_layer_norm_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * g = dst->src[0];
    const struct ggml_tensor * x = dst->src[1];
    const int hw = gglua_ln_has(userdata, 32);
    const int64_t n = x->ne[0], rows = ggml_nrows(x);
    const float * mean = (const float *) dst->src[2]->data;
    const float * rstd = mean + rows;
    const float * w = hw ? (const float *) dst->src[3]->data : NULL;
    float * dx = (float *) dst->data;
    float * dw = dx + rows * n;
    float * db = dw + n;
    int64_t r0, r1;
    gglua_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float * gr = (const float *) g->data + r * n;
        const float * xr = (const float *) x->data + r * n;
        const float m = mean[r], rs = rstd[r];
        double a = 0.0, c = 0.0;
        for (int64_t i = 0; i < n; i++) {
            const float gh = w ? gr[i] * w[i] : gr[i];
            a += gh;
            c += (double) gh * (double) ((xr[i] - m) * rs);
        }
        const float ma = (float) (a / (double) n), mc = (float) (c / (double) n);
        float * dr = dx + r * n;
        for (int64_t i = 0; i < n; i++) {
            const float gh = w ? gr[i] * w[i] : gr[i];
            dr[i] = rs * (gh - ma - (xr[i] - m) * rs * mc);
        }
    }
    int64_t c0, c1;
    gglua_share(n, ith, nth, &c0, &c1);
    for (int64_t i = c0; i < c1; i++) {
        dw[i] = 0.0f;
        db[i] = 0.0f;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float * gr = (const float *) g->data + r * n;
        const float * xr = (const float *) x->data + r * n;
        const float m = mean[r], rs = rstd[r];
        for (int64_t i = c0; i < c1; i++) {
            dw[i] += gr[i] * ((xr[i] - m) * rs);
            db[i] += gr[i];
        }
    }
}

struct ggml_tensor * gglua_layer_norm_node(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * w,
                                           struct ggml_tensor * b, uint64_t code) {
    struct ggml_tensor * args[3] = {x, NULL, NULL};
    int k = 1;
    if (w) {
        args[k++] = w;
    }
    if (b) {
        args[k++] = b;
    }
    const int64_t rows = ggml_nrows(x);
    struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, rows * x->ne[0] + 2 * rows, 1, 1, 1, args, k, gglua_layer_norm_f32, -1,
                                            (void *) (uintptr_t) code);
    ggml_set_name(t, "layer_norm");
    return t;
}

struct ggml_tensor * gglua_layer_norm_back_node(struct ggml_context * ctx, struct ggml_tensor * g, struct ggml_tensor * x,
                                                struct ggml_tensor * stats, struct ggml_tensor * w, uint64_t code) {
    struct ggml_tensor * args[4] = {g, x, stats, w};
    const int64_t n = x->ne[0];
    struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, ggml_nrows(x) * n + 2 * n, 1, 1, 1, args, w ? 4 : 3,
                                            gglua_layer_norm_back_f32, -1, (void *) (uintptr_t) code);
    ggml_set_name(t, "layer_norm_back");
    return t;
}
