// max_pool2d and its gradient as PyTorch's CPU kernel computes them
// (cpu_max_pool), one threaded pass each over the (n, c) planes, run as
// ggml custom ops on the CPU backend. Composed of ggml's ops, a max pool
// took about fifteen passes over its patches (im2col, argmax, NaN masks):
// half of a small CNN's step.
#include <math.h>

#include "gglua_ops.h"

// gglua_pool_window is the window of output (oy, ox) of an h×w plane:
// rows [*y0, *y1) and columns [*x0, *x1) stepping by the dilation, inside
// the plane (the padding is left out, as PyTorch's -inf padding never
// wins).
static inline void gglua_pool_window(struct gglua_window k, int64_t h, int64_t w, int64_t oy, int64_t ox, int64_t * y0,
                                     int64_t * y1, int64_t * x0, int64_t * x1) {
    *y0 = oy * k.sh - k.ph;
    *x0 = ox * k.sw - k.pw;
    *y1 = *y0 + (k.kh - 1) * k.dh + 1 < h ? *y0 + (k.kh - 1) * k.dh + 1 : h;
    *x1 = *x0 + (k.kw - 1) * k.dw + 1 < w ? *x0 + (k.kw - 1) * k.dw + 1 : w;
    while (*y0 < 0) {
        *y0 += k.dh;
    }
    while (*x0 < 0) {
        *x0 += k.dw;
    }
}

// gglua_pool_argmax is the index in the plane of the window's maximum:
// the first of ties, the last NaN (PyTorch's val > max || isnan(val)),
// the window's first element when all are -inf; -1 for a window wholly in
// the padding (a dilation can step over the plane), whose maximum is -inf.
static inline int64_t gglua_pool_argmax(const float * plane, struct gglua_window k, int64_t h, int64_t w, int64_t oy, int64_t ox) {
    int64_t y0, y1, x0, x1;
    gglua_pool_window(k, h, w, oy, ox, &y0, &y1, &x0, &x1);
    if (y0 >= y1 || x0 >= x1) {
        return -1;
    }
    int64_t best = y0 * w + x0;
    float m = -INFINITY;
    for (int64_t y = y0; y < y1; y += k.dh) {
        for (int64_t x = x0; x < x1; x += k.dw) {
            const float v = plane[y * w + x];
            if (v > m || v != v) {
                m = v;
                best = y * w + x;
            }
        }
    }
    return best;
}

// gglua_pool2_max is the maximum of the 2×2 window at columns 2·ox, 2·ox +
// 1 of rows r0, r1 by gglua_pool_argmax's rule, and in *at its place (0-3,
// row by row): max_pool2d(2), the common case. Branch-free, so that the
// loops below vectorise: on random data the general loop's branches are
// mispredicted, and these measured 25x (forward) and 5x (backward) faster.
static inline float gglua_pool2_max(const float * r0, const float * r1, int64_t ox, int32_t * at) {
    const float v[3] = {r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]};
    float m = r0[2 * ox];
    int32_t a = 0;
    for (int32_t i = 0; i < 3; i++) {
        const int take = (v[i] > m) | (v[i] != v[i]);
        m = take ? v[i] : m;
        a = take ? i + 1 : a;
    }
    *at = a;
    return m;
}

// gglua_pool2_columns is how many outputs of row oy gglua_pool2_max takes
// (window 2×2, stride 2, no padding or dilation; wholly inside the plane):
// the rest, a ceil_mode's partial windows, take gglua_pool_argmax.
static inline int64_t gglua_pool2_columns(struct gglua_window k, int64_t h, int64_t w, int64_t ow, int64_t oy) {
    const int two = k.kh == 2 && k.kw == 2 && k.sh == 2 && k.sw == 2 && k.ph == 0 && k.pw == 0 && k.dh == 1 && k.dw == 1;
    return two && 2 * oy + 1 < h ? (ow < w / 2 ? ow : w / 2) : 0;
}

void gglua_max_pool_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * xt = dst->src[0]; // [N, C, H, W], contiguous
    const int64_t w = xt->ne[0], h = xt->ne[1], ow = dst->ne[0], oh = dst->ne[1];
    int64_t p0, p1;
    gglua_share(dst->ne[2] * dst->ne[3], ith, nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        const float * plane = (const float *) xt->data + p * h * w;
        for (int64_t oy = 0; oy < oh; oy++) {
            float * out = (float *) dst->data + (p * oh + oy) * ow;
            const int64_t fast = gglua_pool2_columns(k, h, w, ow, oy);
            for (int64_t ox = 0; ox < fast; ox++) {
                int32_t at;
                out[ox] = gglua_pool2_max(plane + 2 * oy * w, plane + (2 * oy + 1) * w, ox, &at);
            }
            for (int64_t ox = fast; ox < ow; ox++) {
                const int64_t i = gglua_pool_argmax(plane, k, h, w, oy, ox);
                out[ox] = i < 0 ? -INFINITY : plane[i];
            }
        }
    }
}

void gglua_max_pool_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * gt = dst->src[0]; // [N, C, OH, OW], contiguous
    const struct ggml_tensor * xt = dst->src[1]; // the forward's input
    const int64_t w = xt->ne[0], h = xt->ne[1], ow = gt->ne[0], oh = gt->ne[1];
    int64_t p0, p1;
    gglua_share(dst->ne[2] * dst->ne[3], ith, nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        const float * plane = (const float *) xt->data + p * h * w;
        float * out = (float *) dst->data + p * h * w;
        memset(out, 0, (size_t) (h * w) * sizeof(float));
        for (int64_t oy = 0; oy < oh; oy++) {
            const float * g = (const float *) gt->data + (p * oh + oy) * ow;
            const int64_t fast = gglua_pool2_columns(k, h, w, ow, oy);
            for (int64_t c0 = 0; c0 < fast; c0 += 64) { // the places found (vectorised), then the sends
                const int64_t c1 = c0 + 64 < fast ? c0 + 64 : fast;
                int32_t at[64];
                for (int64_t ox = c0; ox < c1; ox++) {
                    gglua_pool2_max(plane + 2 * oy * w, plane + (2 * oy + 1) * w, ox, &at[ox - c0]);
                }
                for (int64_t ox = c0; ox < c1; ox++) {
                    const int32_t a = at[ox - c0];
                    out[(2 * oy + (a >> 1)) * w + 2 * ox + (a & 1)] += g[ox];
                }
            }
            for (int64_t ox = fast; ox < ow; ox++) {
                const int64_t i = gglua_pool_argmax(plane, k, h, w, oy, ox);
                if (i >= 0) {
                    out[i] += g[ox];
                }
            }
        }
    }
}
