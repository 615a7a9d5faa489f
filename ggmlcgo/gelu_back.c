// The gradient of gelu (erf form) times the incoming gradient, in one pass
// for the CPU backend, run as a ggml custom op. Built from ggml's own ops
// it was sixteen nodes over the MLP's widest tensor (ggml has no erf, and
// its CPU exp is scalar and single-threaded).
#include <math.h>

#include "gglua_ops.h"

void gglua_gelu_erf_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const float * g = (const float *) dst->src[0]->data;
    const float * x = (const float *) dst->src[1]->data;
    float * d = (float *) dst->data;
    int64_t i0, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float v = x[i];
        // Φ(v) from erf, as PyTorch's gelu backward (the forward's result
        // is not kept for it); v·φ(v) is NaN at ±inf (∞·0), as in PyTorch.
        const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
        const float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
        d[i] = g[i] * (cdf + v * pdf);
    }
}
