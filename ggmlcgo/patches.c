// A convolution's patches on the CPU: im2col, its adjoint col2im (the
// input's gradient, a transposed convolution's last step), and the
// per-image forms the OpenBLAS convolution (conv_cpu in blas_openblas.go)
// runs image by image. ggml's own im2col decides every element's bounds
// one by one; composed of ggml's ops, col2im was a transpose of the
// patches, a get_rows_back and a permute back.
#include "gglua_ops.h"

// gglua_patches_rows writes output rows [oy0, oy1) of one image's patches
// in order: one position's c·kh·kw values after another (contiguous writes
// measured 3x faster than filling a row of positions column by column),
// each kernel row read from one input row, zeros where the window leaves
// the input. kw is the kernel's width; a constant one (below) lets the
// compiler unroll the innermost loop, 3x faster again.
static inline void gglua_patches_rows(const int64_t kw, const struct gglua_window k, const float * x, int64_t c, int64_t h,
                                      int64_t w, int64_t ow, int64_t oy0, int64_t oy1, float * o) {
    const int64_t kh = k.kh, sh = k.sh, sw = k.sw, ph = k.ph, pw = k.pw, dh = k.dh, dw = k.dw;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        for (int64_t ox = 0; ox < ow; ox++) {
            const int64_t x0 = ox * sw - pw; // the window's columns: x0 + j·dw
            const int inside = x0 >= 0 && x0 + (kw - 1) * dw < w;
            for (int64_t ch = 0; ch < c; ch++) {
                const float * plane = x + ch * h * w;
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
                            const int64_t xx = x0 + j * dw;
                            o[j] = xx >= 0 && xx < w ? row[xx] : 0;
                        }
                    }
                }
            }
        }
    }
}

void gglua_patches(const float * x, int64_t c, int64_t h, int64_t w, int64_t ow, struct gglua_window k, int64_t oy0, int64_t oy1,
                   float * cols) {
    switch (k.kw) {
        case 1: gglua_patches_rows(1, k, x, c, h, w, ow, oy0, oy1, cols); break;
        case 2: gglua_patches_rows(2, k, x, c, h, w, ow, oy0, oy1, cols); break;
        case 3: gglua_patches_rows(3, k, x, c, h, w, ow, oy0, oy1, cols); break;
        case 4: gglua_patches_rows(4, k, x, c, h, w, ow, oy0, oy1, cols); break;
        case 5: gglua_patches_rows(5, k, x, c, h, w, ow, oy0, oy1, cols); break;
        case 7: gglua_patches_rows(7, k, x, c, h, w, ow, oy0, oy1, cols); break;
        default: gglua_patches_rows(k.kw, k, x, c, h, w, ow, oy0, oy1, cols);
    }
}

// gglua_patches_add_rows is gglua_patches_rows in reverse: each patch
// element added where it was taken from (kw likewise a constant where it
// can be).
static inline void gglua_patches_add_rows(const int64_t kw, const struct gglua_window k, const float * g, int64_t c, int64_t h,
                                          int64_t w, int64_t oh, int64_t ow, float * out) {
    const int64_t kh = k.kh, sh = k.sh, sw = k.sw, ph = k.ph, pw = k.pw, dh = k.dh, dw = k.dw;
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
                        const int64_t xx = x0 + j * dw;
                        if (inside || (xx >= 0 && xx < w)) {
                            row[xx] += g[j];
                        }
                    }
                }
            }
        }
    }
}

void gglua_patches_add(const float * cols, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, struct gglua_window k,
                       float * out) {
    memset(out, 0, (size_t) (c * h * w) * sizeof(float));
    switch (k.kw) {
        case 1: gglua_patches_add_rows(1, k, cols, c, h, w, oh, ow, out); break;
        case 2: gglua_patches_add_rows(2, k, cols, c, h, w, oh, ow, out); break;
        case 3: gglua_patches_add_rows(3, k, cols, c, h, w, oh, ow, out); break;
        case 4: gglua_patches_add_rows(4, k, cols, c, h, w, oh, ow, out); break;
        case 5: gglua_patches_add_rows(5, k, cols, c, h, w, oh, ow, out); break;
        case 7: gglua_patches_add_rows(7, k, cols, c, h, w, oh, ow, out); break;
        default: gglua_patches_add_rows(k.kw, k, cols, c, h, w, oh, ow, out);
    }
}

// gglua_columns is the positions ox in [*lo, *hi) of a row whose kernel
// column reads input column x0 + ox·sw inside [0, w).
static inline void gglua_columns(int64_t x0, int64_t sw, int64_t w, int64_t ow, int64_t * lo, int64_t * hi) {
    *lo = x0 < 0 ? (-x0 + sw - 1) / sw : 0;
    *hi = x0 < w ? (w - 1 - x0) / sw + 1 : 0;
    *hi = *hi < ow ? *hi : ow;
    *lo = *lo < *hi ? *lo : *hi;
}

void gglua_patches_kp(const float * x, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, struct gglua_window k, float * cols) {
    for (int64_t ch = 0; ch < c; ch++) {
        for (int64_t i = 0; i < k.kh; i++) {
            for (int64_t j = 0; j < k.kw; j++) {
                const int64_t x0 = j * k.dw - k.pw;
                int64_t lo, hi;
                gglua_columns(x0, k.sw, w, ow, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++, cols += ow) {
                    const int64_t y = oy * k.sh + i * k.dh - k.ph;
                    if (y < 0 || y >= h) {
                        memset(cols, 0, (size_t) ow * sizeof(float));
                        continue;
                    }
                    const float * row = x + (ch * h + y) * w;
                    for (int64_t ox = 0; ox < lo; ox++) {
                        cols[ox] = 0;
                    }
                    if (k.sw == 1) { // a contiguous run
                        memcpy(cols + lo, row + x0 + lo, (size_t) (hi - lo) * sizeof(float));
                    } else {
                        for (int64_t ox = lo; ox < hi; ox++) {
                            cols[ox] = row[x0 + ox * k.sw];
                        }
                    }
                    for (int64_t ox = hi; ox < ow; ox++) {
                        cols[ox] = 0;
                    }
                }
            }
        }
    }
}

void gglua_patches_add_kp(const float * cols, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, struct gglua_window k,
                          float * out) {
    memset(out, 0, (size_t) (c * h * w) * sizeof(float));
    for (int64_t ch = 0; ch < c; ch++) {
        for (int64_t i = 0; i < k.kh; i++) {
            for (int64_t j = 0; j < k.kw; j++) {
                const int64_t x0 = j * k.dw - k.pw;
                int64_t lo, hi;
                gglua_columns(x0, k.sw, w, ow, &lo, &hi);
                for (int64_t oy = 0; oy < oh; oy++, cols += ow) {
                    const int64_t y = oy * k.sh + i * k.dh - k.ph;
                    if (y < 0 || y >= h) {
                        continue;
                    }
                    float * row = out + (ch * h + y) * w + x0;
                    for (int64_t ox = lo; ox < hi; ox++) {
                        row[ox * k.sw] += cols[ox];
                    }
                }
            }
        }
    }
}

void gglua_im2col_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * xt = dst->src[0]; // [N, C, H, W], contiguous
    const int64_t w = xt->ne[0], h = xt->ne[1], c = xt->ne[2];
    const int64_t ckk = dst->ne[0], ow = dst->ne[1], oh = dst->ne[2];
    int64_t r0, r1;
    gglua_share(oh * dst->ne[3], ith, nth, &r0, &r1);
    while (r0 < r1) { // the rows of one image at a time
        const int64_t n = r0 / oh, oy0 = r0 % oh, oy1 = n * oh + oh < r1 ? oh : r1 - n * oh;
        gglua_patches((const float *) xt->data + n * c * h * w, c, h, w, ow, k, oy0, oy1, (float *) dst->data + r0 * ow * ckk);
        r0 = n * oh + oy1;
    }
}

void gglua_col2im_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * gt = dst->src[0]; // ne (C·KH·KW, OW, OH, N)
    const int64_t w = dst->ne[0], h = dst->ne[1], c = dst->ne[2];
    const int64_t ckk = gt->ne[0], ow = gt->ne[1], oh = gt->ne[2];
    int64_t n0, n1;
    gglua_share(dst->ne[3], ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) { // an image's planes are one thread's: no two add to one element
        gglua_patches_add((const float *) gt->data + n * oh * ow * ckk, c, h, w, oh, ow, k, (float *) dst->data + n * c * h * w);
    }
}
