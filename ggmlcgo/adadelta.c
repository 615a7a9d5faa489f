// Adadelta's step for the CPU backend, one pass in place of the parameter
// (a ggml custom op): composed of ggml's ops it is a dozen passes over
// gradient-sized tensors, each a fresh one, a tenth of a small CNN's step.
// The update is the composition's (core/optim_rules.go), operation for
// operation, and contraction into fused multiply-adds is off, so the two
// agree bit for bit; eight floats at a time where the build has AVX.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif
#pragma STDC FP_CONTRACT OFF
#include <math.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "gglua_ops.h"

void gglua_adadelta_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    float * w = (float *) dst->data; // the parameter's memory (dst is its view)
    const float * g = (const float *) dst->src[1]->data;
    float * sq = (float *) dst->src[2]->data;
    float * acc = (float *) dst->src[3]->data;
    const float * p = (const float *) dst->src[4]->data;
    const float rho = p[0], rho1 = p[1], eps = p[2], wd = p[3], nlr = p[4]; // rho1 = 1 - rho, nlr = -lr
    int64_t i, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i, &i1);
#if defined(__AVX__)
    const __m256 r = _mm256_set1_ps(rho), r1 = _mm256_set1_ps(rho1), e = _mm256_set1_ps(eps);
    const __m256 d = _mm256_set1_ps(wd), n = _mm256_set1_ps(nlr);
    for (; i + 8 <= i1; i += 8) {
        const __m256 wi = _mm256_loadu_ps(w + i);
        __m256 gi = _mm256_loadu_ps(g + i);
        if (wd != 0) {
            gi = _mm256_add_ps(gi, _mm256_mul_ps(wi, d));
        }
        const __m256 s = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(sq + i), r), _mm256_mul_ps(_mm256_mul_ps(gi, gi), r1));
        _mm256_storeu_ps(sq + i, s);
        const __m256 std = _mm256_sqrt_ps(_mm256_add_ps(s, e));
        const __m256 delta = _mm256_mul_ps(_mm256_div_ps(_mm256_sqrt_ps(_mm256_add_ps(_mm256_loadu_ps(acc + i), e)), std), gi);
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(acc + i), r), _mm256_mul_ps(_mm256_mul_ps(delta, delta), r1)));
        _mm256_storeu_ps(w + i, _mm256_add_ps(wi, _mm256_mul_ps(delta, n)));
    }
#endif
    for (; i < i1; i++) {
        float gi = g[i];
        if (wd != 0) {
            gi = gi + w[i] * wd;
        }
        sq[i] = sq[i] * rho + gi * gi * rho1;
        const float delta = sqrtf(acc[i] + eps) / sqrtf(sq[i] + eps) * gi;
        acc[i] = acc[i] * rho + delta * delta * rho1;
        w[i] = w[i] + delta * nlr;
    }
}
