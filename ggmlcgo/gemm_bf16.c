// A product of bf16-rounded operands with f32 sums (autocast's products):
// the CPU form of the custom node that gglua-kernels.cu runs on cuBLAS. On
// the CPU, autocast's products go through ggml's own mul_mat (its bf16 dot
// products); this kernel is the same node's reference, so tests on the CPU
// build the graphs a GPU runs.
#include <string.h>

#include "gglua_ops.h"

// gglua_round_bf16 is f rounded to bf16 (to nearest, ties to even; NaN
// stays a quiet NaN), as ggml's and PyTorch's conversions round, widened
// back to f32.
static inline float gglua_round_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        u = (u | 0x00400000u) & 0xffff0000u;
    } else {
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    }
    memcpy(&f, &u, sizeof f);
    return f;
}

// gglua_bf16_operand is element i of t (f32, rounded to bf16; or bf16).
static inline float gglua_bf16_operand(const struct ggml_tensor * t, int64_t i) {
    if (t->type == GGML_TYPE_BF16) {
        const uint32_t u = (uint32_t) ((const uint16_t *) t->data)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return gglua_round_bf16(((const float *) t->data)[i]);
}

void gglua_gemm_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const int * f = (const int *) userdata; // {ta, tb}
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    const int64_t M = dst->ne[1] * dst->ne[2] * dst->ne[3], N = dst->ne[0];
    const int64_t K = f[0] ? a->ne[1] * a->ne[2] * a->ne[3] : a->ne[0];
    float * d = (float *) dst->data;
    int64_t i0, i1;
    gglua_share(M, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        for (int64_t j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float x = gglua_bf16_operand(a, f[0] ? k * M + i : i * K + k);
                const float y = gglua_bf16_operand(b, f[1] ? j * K + k : k * N + j);
                sum += x * y;
            }
            d[i * N + j] = sum;
        }
    }
}
