//go:build openblas

// A 2-d convolution on the CPU with OpenBLAS, image by image: each image's
// patches (im2col) go into a scratch block of the thread's own, small
// enough to stay in the cache, and are multiplied there; the patches of
// the whole batch are never in memory (for the MNIST network's second
// convolution they were 42 MB, written, read back by three products and
// scattered again by col2im every step). Run as ggml custom ops; OpenBLAS
// runs single-threaded inside ggml's threads (blas_openblas.go).
#include <cblas.h>

#include "gglua_ops.h"

// gglua_conv_scratch is thread ith's scratch block (dst->src[2], one row
// of ne0 floats a thread) and the number of threads that work: those with
// a block (the pool may run fewer threads than it has, never more).
static float * gglua_conv_scratch(const struct ggml_tensor * dst, int ith, int nth, int * workers) {
    const struct ggml_tensor * s = dst->src[2];
    *workers = nth < s->ne[1] ? nth : (int) s->ne[1];
    return ith < *workers ? (float *) s->data + ith * s->ne[0] : NULL;
}

// gglua_conv_forward: dst [N, OC, OH, OW] = the convolution of x =
// dst->src[0] [N, C, H, W] by w = src[1] (ne (C·KH·KW, OC)), plus the bias
// src[3] (OC) where given; the images split over the threads.
void gglua_conv_forward_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * x = dst->src[0], * wt = dst->src[1], * bt = dst->src[3];
    const int64_t w = x->ne[0], h = x->ne[1], c = x->ne[2];
    const int64_t ow = dst->ne[0], oh = dst->ne[1], oc = dst->ne[2], p = ow * oh, kk = wt->ne[0];
    int workers;
    float * cols = gglua_conv_scratch(dst, ith, nth, &workers);
    if (cols == NULL) {
        return;
    }
    int64_t n0, n1;
    gglua_share(x->ne[3], ith, workers, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
        float * out = (float *) dst->data + n * oc * p;
        gglua_patches_kp((const float *) x->data + n * c * h * w, c, h, w, oh, ow, k, cols);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int) oc, (int) p, (int) kk, 1.0f, (const float *) wt->data, (int) kk,
                    cols, (int) p, 0.0f, out, (int) p);
        for (int64_t o = 0; bt != NULL && o < oc; o++) {
            const float b = ((const float *) bt->data)[o];
            for (int64_t i = 0; i < p; i++) {
                out[o * p + i] += b;
            }
        }
    }
}

// gglua_conv_weight_grad: dst (C·KH·KW, OC) = the weight's gradient from
// g = dst->src[0] [N, OC, OH, OW] and x = src[1], summed over the images;
// the input channels (dst's columns) split over the threads, each making
// the patches of its channels only.
void gglua_conv_weight_grad_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * g = dst->src[0], * x = dst->src[1];
    const int64_t w = x->ne[0], h = x->ne[1], c = x->ne[2];
    const int64_t ow = g->ne[0], oh = g->ne[1], oc = g->ne[2], p = ow * oh, kk = dst->ne[0], per = k.kh * k.kw;
    int workers;
    float * cols = gglua_conv_scratch(dst, ith, nth, &workers);
    if (cols == NULL) {
        return;
    }
    int64_t c0, c1;
    gglua_share(c, ith, workers, &c0, &c1);
    const int64_t part = (c1 - c0) * per;
    for (int64_t n = 0; n < x->ne[3] && part > 0; n++) {
        gglua_patches_kp((const float *) x->data + (n * c + c0) * h * w, c1 - c0, h, w, oh, ow, k, cols);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int) oc, (int) part, (int) p, 1.0f, (const float *) g->data + n * oc * p,
                    (int) p, cols, (int) p, n ? 1.0f : 0.0f, (float *) dst->data + c0 * per, (int) kk);
    }
}

// gglua_conv_input_grad: dst [N, C, H, W] = the input's gradient from g =
// dst->src[0] [N, OC, OH, OW] and w = src[1] (ne (C·KH·KW, OC)): each
// image's patch gradient, then added back where its patches came from;
// the images split over the threads.
void gglua_conv_input_grad_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct gglua_window k = gglua_window_of(userdata);
    const struct ggml_tensor * g = dst->src[0], * wt = dst->src[1];
    const int64_t w = dst->ne[0], h = dst->ne[1], c = dst->ne[2];
    const int64_t ow = g->ne[0], oh = g->ne[1], oc = g->ne[2], p = ow * oh, kk = wt->ne[0];
    int workers;
    float * cols = gglua_conv_scratch(dst, ith, nth, &workers);
    if (cols == NULL) {
        return;
    }
    int64_t n0, n1;
    gglua_share(dst->ne[3], ith, workers, &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int) kk, (int) p, (int) oc, 1.0f, (const float *) wt->data, (int) kk,
                    (const float *) g->data + n * oc * p, (int) p, 0.0f, cols, (int) p);
        gglua_patches_add_kp(cols, c, h, w, oh, ow, k, (float *) dst->data + n * c * h * w);
    }
}
