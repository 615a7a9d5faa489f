// GELU (erf form) into bf16, and its gradient times the incoming
// gradient, each in one pass for the CPU backend, run as ggml custom ops
// (the CPU forms of gglua-kernels.cu's gelu_bf16 and gelu_back). Built
// from ggml's own ops the gradient was sixteen nodes over the MLP's widest
// tensor (ggml has no erf, and its CPU exp is scalar and single-threaded).
#include <math.h>

#include "gglua_ops.h"

// phi_cdf is Φ(v) = (1 + erf(v/√2)) / 2 given e = exp(-v²/2), by
// Abramowitz and Stegun 7.1.26 (|error of erf| < 1.5e-7), the form of
// PyTorch's own vectorised CPU erf: one polynomial beside the exp that
// φ(v) needs anyway, where libm's erff cost as much again (GELU's
// forward and backward over [2048, 1024]: 21 -> 29 ms a step).
static inline float phi_cdf(float v, float e) {
    const float z = fabsf(v) * 0.70710678118654752f;
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float erf_z = 1.0f - poly * e; // e = exp(-z²)
    return 0.5f * (1.0f + (v < 0.0f ? -erf_z : erf_z));
}

// gglua_gelu_bf16_f32 writes dst (bf16) = x Φ(x) for x = dst->src[0]
// (contiguous f32 or bf16 of dst's shape), rounded: the input of a product
// under autocast (MLP in core).
void gglua_gelu_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * x = dst->src[0];
    uint16_t * d = (uint16_t *) dst->data;
    int64_t i0, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float v = gglua_element(x, i);
        d[i] = gglua_bf16_bits(v * phi_cdf(v, expf(-0.5f * v * v)));
    }
}

void gglua_gelu_erf_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const float * g = (const float *) dst->src[0]->data;
    const struct ggml_tensor * x = dst->src[1];
    const int round = dst->type == GGML_TYPE_BF16; // a gradient that a product rounds anyway
    int64_t i0, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float v = gglua_element(x, i);
        // Φ(v) from erf, as PyTorch's gelu backward (the forward's result
        // is not kept for it); v·φ(v) is NaN at ±inf (∞·0), as in PyTorch.
        const float e = expf(-0.5f * v * v);
        const float r = g[i] * (phi_cdf(v, e) + v * (0.39894228040143268f * e));
        if (round) {
            ((uint16_t *) dst->data)[i] = gglua_bf16_bits(r);
        } else {
            ((float *) dst->data)[i] = r;
        }
    }
}
