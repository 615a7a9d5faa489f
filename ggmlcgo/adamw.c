// AdamW's step for the CPU backend, run as a ggml custom op in place of the
// parameter. ggml's own loop (opt_step_adamw) stays scalar: its pointers may
// alias, and sqrtf's errno keeps compilers from vectorising it (cgo refuses
// -fno-math-errno). Here the same update, in the same order, runs eight
// floats at a time where the build has AVX, the scalar loop elsewhere; the
// results differ from ggml's by at most a rounding of the fused
// multiply-adds the compiler may choose in either.
#include <math.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "gglua_ops.h"

void gglua_adamw_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    float * w = (float *) dst->data; // the parameter's memory (dst is its view)
    const float * g = (const float *) dst->src[1]->data;
    float * m = (float *) dst->src[2]->data;
    float * v = (float *) dst->src[3]->data;
    const float * p = (const float *) dst->src[4]->data;
    const float alpha = p[0], beta1 = p[1], beta2 = p[2], eps = p[3], wd = p[4], beta1h = p[5], beta2h = p[6];
    const float keep = 1.f - alpha * wd;
    int64_t i, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i, &i1);
#if defined(__AVX__)
    const __m256 b1 = _mm256_set1_ps(beta1), c1 = _mm256_set1_ps(1.0f - beta1);
    const __m256 b2 = _mm256_set1_ps(beta2), c2 = _mm256_set1_ps(1.0f - beta2);
    const __m256 h1 = _mm256_set1_ps(beta1h), h2 = _mm256_set1_ps(beta2h);
    const __m256 e = _mm256_set1_ps(eps), k = _mm256_set1_ps(keep), a = _mm256_set1_ps(alpha);
    for (; i + 8 <= i1; i += 8) {
        const __m256 gi = _mm256_loadu_ps(g + i);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(gi, c1));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(gi, gi), c2));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 vh = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vi, h2)), e);
        const __m256 step = _mm256_div_ps(_mm256_mul_ps(a, _mm256_mul_ps(mi, h1)), vh);
        _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), k), step));
    }
#endif
    for (; i < i1; i++) {
        m[i] = m[i] * beta1 + g[i] * (1.0f - beta1);
        v[i] = v[i] * beta2 + g[i] * g[i] * (1.0f - beta2);
        const float mh = m[i] * beta1h;
        const float vh = sqrtf(v[i] * beta2h) + eps;
        w[i] = w[i] * keep - alpha * mh / vh;
    }
}
