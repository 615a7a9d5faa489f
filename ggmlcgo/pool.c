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

void gglua_max_pool_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * xt = dst->src[0]; // [N, C, H, W], contiguous
    const int64_t w = xt->ne[0], h = xt->ne[1], ow = dst->ne[0], oh = dst->ne[1];
    int64_t p0, p1;
    gglua_share(dst->ne[2] * dst->ne[3], ith, nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        const float * plane = (const float *) xt->data + p * h * w;
        float * out = (float *) dst->data + p * oh * ow;
        for (int64_t oy = 0; oy < oh; oy++) {
            for (int64_t ox = 0; ox < ow; ox++) {
                const int64_t i = gglua_pool_argmax(plane, k, h, w, oy, ox);
                out[oy * ow + ox] = i < 0 ? -INFINITY : plane[i];
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
        const float * g = (const float *) gt->data + p * oh * ow;
        float * out = (float *) dst->data + p * h * w;
        memset(out, 0, (size_t) (h * w) * sizeof(float));
        for (int64_t oy = 0; oy < oh; oy++) {
            for (int64_t ox = 0; ox < ow; ox++) {
                const int64_t i = gglua_pool_argmax(plane, k, h, w, oy, ox);
                if (i >= 0) {
                    out[i] += g[oy * ow + ox];
                }
            }
        }
    }
}
