// col2im, im2col's adjoint (a convolution's input gradient, a transposed
// convolution's last step), one threaded pass on the CPU backend, run as a
// ggml custom op. Composed of ggml's ops it was a transpose of the patches,
// a get_rows_back into the padded input, and a permute back: three passes
// over the largest tensor of a convolution's backward.
#include "gglua_ops.h"

void gglua_col2im_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * gt = dst->src[0]; // ne (C·KH·KW, OW, OH, N)
    const int64_t w = dst->ne[0], h = dst->ne[1], c = dst->ne[2];
    const int64_t ckk = gt->ne[0], ow = gt->ne[1], oh = gt->ne[2];
    int64_t n0, n1;
    gglua_share(dst->ne[3], ith, nth, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) { // an image's planes are one thread's: no two add to one element
        float * out = (float *) dst->data + n * c * h * w;
        memset(out, 0, (size_t) (c * h * w) * sizeof(float));
        for (int64_t oy = 0; oy < oh; oy++) {
            for (int64_t ox = 0; ox < ow; ox++) {
                const float * g = (const float *) gt->data + ((n * oh + oy) * ow + ox) * ckk;
                for (int64_t ch = 0; ch < c; ch++) {
                    for (int64_t i = 0; i < k.kh; i++) {
                        const int64_t y = oy * k.sh + i * k.dh - k.ph;
                        if (y < 0 || y >= h) {
                            continue;
                        }
                        float * row = out + (ch * h + y) * w;
                        const float * gr = g + (ch * k.kh + i) * k.kw;
                        for (int64_t j = 0; j < k.kw; j++) {
                            const int64_t x = ox * k.sw + j * k.dw - k.pw;
                            if (x >= 0 && x < w) {
                                row[x] += gr[j];
                            }
                        }
                    }
                }
            }
        }
    }
}
