// im2col and col2im, a convolution's patches and their adjoint (its input
// gradient, a transposed convolution's last step), one threaded pass each
// on the CPU backend, run as ggml custom ops. ggml's own im2col decides
// every element's bounds one by one; composed of ggml's ops, col2im was a
// transpose of the patches, a get_rows_back and a permute back: passes over
// the largest tensor of a convolution.
#include "gglua_ops.h"

// gglua_im2col_rows writes output rows [r0, r1) of im2col's patches, in
// order: one position's C·KH·KW values after another (contiguous writes
// measured 3x faster than filling a row of positions column by column),
// each kernel row read from one input row, zeros where the window leaves
// the input. kw is the kernel's width; a constant one (below) lets the
// compiler unroll the innermost loop, 3x faster again.
static inline void gglua_im2col_rows(const int64_t kw, const struct gglua_window k, const struct ggml_tensor * dst,
                                     int64_t r0, int64_t r1) {
    const struct ggml_tensor * xt = dst->src[0]; // [N, C, H, W], contiguous
    const int64_t w = xt->ne[0], h = xt->ne[1], c = xt->ne[2];
    const int64_t ckk = dst->ne[0], ow = dst->ne[1], oh = dst->ne[2];
    const int64_t kh = k.kh, sh = k.sh, sw = k.sw, ph = k.ph, pw = k.pw, dh = k.dh, dw = k.dw;
    for (int64_t r = r0; r < r1; r++) { // one output row (n, oy)
        const int64_t n = r / oh, oy = r % oh;
        float * o = (float *) dst->data + r * ow * ckk;
        for (int64_t ox = 0; ox < ow; ox++) {
            const int64_t x0 = ox * sw - pw; // the window's columns: x0 + j·dw
            const int inside = x0 >= 0 && x0 + (kw - 1) * dw < w;
            for (int64_t ch = 0; ch < c; ch++) {
                const float * plane = (const float *) xt->data + (n * c + ch) * h * w;
                for (int64_t i = 0; i < kh; i++, o += kw) {
                    const int64_t y = oy * sh + i * dh - ph;
                    if (y < 0 || y >= h) {
                        for (int64_t j = 0; j < kw; j++) {
                            o[j] = 0;
                        }
                        continue;
                    }
                    const float * row = plane + y * w;
                    if (inside) {
                        for (int64_t j = 0; j < kw; j++) {
                            o[j] = row[x0 + j * dw];
                        }
                    } else {
                        for (int64_t j = 0; j < kw; j++) {
                            const int64_t x = x0 + j * dw;
                            o[j] = x >= 0 && x < w ? row[x] : 0;
                        }
                    }
                }
            }
        }
    }
}

void gglua_im2col_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    int64_t r0, r1;
    gglua_share(dst->ne[2] * dst->ne[3], ith, nth, &r0, &r1);
    switch (k.kw) {
        case 1: gglua_im2col_rows(1, k, dst, r0, r1); break;
        case 2: gglua_im2col_rows(2, k, dst, r0, r1); break;
        case 3: gglua_im2col_rows(3, k, dst, r0, r1); break;
        case 4: gglua_im2col_rows(4, k, dst, r0, r1); break;
        case 5: gglua_im2col_rows(5, k, dst, r0, r1); break;
        case 7: gglua_im2col_rows(7, k, dst, r0, r1); break;
        default: gglua_im2col_rows(k.kw, k, dst, r0, r1);
    }
}

// gglua_col2im_images adds images [n0, n1) of the patches into dst, the
// reverse of gglua_im2col_rows (kw likewise a constant where it can be).
static inline void gglua_col2im_images(const int64_t kw, const struct gglua_window k, const struct ggml_tensor * dst,
                                       int64_t n0, int64_t n1) {
    const struct ggml_tensor * gt = dst->src[0]; // ne (C·KH·KW, OW, OH, N)
    const int64_t w = dst->ne[0], h = dst->ne[1], c = dst->ne[2];
    const int64_t ow = gt->ne[1], oh = gt->ne[2];
    const int64_t kh = k.kh, sh = k.sh, sw = k.sw, ph = k.ph, pw = k.pw, dh = k.dh, dw = k.dw;
    const float * g = (const float *) gt->data + n0 * oh * ow * gt->ne[0];
    for (int64_t n = n0; n < n1; n++) { // an image's planes are one thread's: no two add to one element
        float * out = (float *) dst->data + n * c * h * w;
        memset(out, 0, (size_t) (c * h * w) * sizeof(float));
        for (int64_t oy = 0; oy < oh; oy++) {
            for (int64_t ox = 0; ox < ow; ox++) {
                const int64_t x0 = ox * sw - pw;
                const int inside = x0 >= 0 && x0 + (kw - 1) * dw < w;
                for (int64_t ch = 0; ch < c; ch++) {
                    for (int64_t i = 0; i < kh; i++, g += kw) {
                        const int64_t y = oy * sh + i * dh - ph;
                        if (y < 0 || y >= h) {
                            continue;
                        }
                        float * row = out + (ch * h + y) * w;
                        for (int64_t j = 0; j < kw; j++) {
                            const int64_t x = x0 + j * dw;
                            if (inside || (x >= 0 && x < w)) {
                                row[x] += g[j];
                            }
                        }
                    }
                }
            }
        }
    }
}

void gglua_col2im_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    int64_t n0, n1;
    gglua_share(dst->ne[3], ith, nth, &n0, &n1);
    switch (k.kw) {
        case 1: gglua_col2im_images(1, k, dst, n0, n1); break;
        case 2: gglua_col2im_images(2, k, dst, n0, n1); break;
        case 3: gglua_col2im_images(3, k, dst, n0, n1); break;
        case 4: gglua_col2im_images(4, k, dst, n0, n1); break;
        case 5: gglua_col2im_images(5, k, dst, n0, n1); break;
        case 7: gglua_col2im_images(7, k, dst, n0, n1); break;
        default: gglua_col2im_images(k.kw, k, dst, n0, n1);
    }
}
