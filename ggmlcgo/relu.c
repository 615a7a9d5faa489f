// relu and its gradient as PyTorch computes them, one threaded pass each
// for the CPU backend, run as ggml custom ops. ggml's relu turns NaN into 0;
// keeping it took three more nodes (its tanh, scalar libm, was a quarter of
// a ReLU MLP's step), and the gradient's 0/1 mask times g gave NaN where g
// is infinite at a negative input, where PyTorch selects 0.
#include <string.h>

#include "gglua_ops.h"

// gglua_relu1 is PyTorch's relu of one float: v where v > 0, NaN stays NaN,
// -0 stays -0 (max(v, 0) keeps v when the two compare equal), else +0. -0
// is matched by its bits: were subnormals flushed, a negative one would
// compare equal to 0, and it must give +0.
static inline float gglua_relu1(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return v > 0 || v != v || bits == 0x80000000u ? v : 0.0f;
}

void gglua_relu_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const float * x = (const float *) dst->src[0]->data;
    float * y = (float *) dst->data;
    int64_t i0, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float v = x[i];
        y[i] = gglua_relu1(v);
    }
}

void gglua_relu_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const float * g = (const float *) dst->src[0]->data;
    const struct ggml_tensor * yt = dst->src[1]; // relu's result, f32 or bf16
    float * d = (float *) dst->data;
    int64_t i0, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float v = gglua_element(yt, i);
        const float r = v > 0 || v != v ? g[i] : 0.0f; // PyTorch: g where relu(x) > 0 or is NaN
        if (dst->type == GGML_TYPE_BF16) {
            ((uint16_t *) d)[i] = gglua_bf16_bits(r);
        } else {
            d[i] = r;
        }
    }
}

void gglua_bias_relu_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const float * a = (const float *) dst->src[0]->data;
    const float * bias = (const float *) dst->src[1]->data; // one row of ne0
    float * y = (float *) dst->data;
    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    gglua_share(ggml_nrows(dst), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t i = 0; i < ne0; i++) {
            const float v = gglua_relu1(a[r * ne0 + i] + bias[i]);
            if (dst->type == GGML_TYPE_BF16) {
                ((uint16_t *) y)[r * ne0 + i] = gglua_bf16_bits(v);
            } else {
                y[r * ne0 + i] = v;
            }
        }
    }
}
