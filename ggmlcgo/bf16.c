// gglua's bf16 kernels for autocast, the CPU forms of custom nodes that
// gglua-kernels.cu runs on a GPU: a product of bf16-rounded operands with
// f32 sums (on CUDA cuBLAS's), the rounding itself, and the column sums
// of a bf16 gradient (a bias's). On the CPU, autocast's products go
// through ggml's own mul_mat (its bf16 dot products); these kernels are the
// nodes' references, so that tests on the CPU build the graphs a GPU runs.
#include <string.h>

#include "gglua_ops.h"

void gglua_gemm_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const int * f = (const int *) userdata; // {ta, tb}
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    const int64_t M = dst->ne[1] * dst->ne[2] * dst->ne[3], N = dst->ne[0];
    const int64_t K = f[0] ? a->ne[1] * a->ne[2] * a->ne[3] : a->ne[0];
    const int round = dst->type == GGML_TYPE_BF16; // the f32 sums rounded once
    const float * bias = dst->src[2] != NULL ? (const float *) dst->src[2]->data : NULL; // added to every row
    int64_t i0, i1;
    gglua_share(M, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        for (int64_t j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float x = gglua_round_bf16(gglua_element(a, f[0] ? k * M + i : i * K + k));
                const float y = gglua_round_bf16(gglua_element(b, f[1] ? j * K + k : k * N + j));
                sum += x * y;
            }
            const float r = bias != NULL ? sum + bias[j] : sum;
            if (round) {
                ((uint16_t *) dst->data)[i * N + j] = gglua_bf16_bits(r);
            } else {
                ((float *) dst->data)[i * N + j] = r;
            }
        }
    }
}

void gglua_round_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const float * x = (const float *) dst->src[0]->data;
    uint16_t * y = (uint16_t *) dst->data;
    int64_t i0, i1;
    gglua_share(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        y[i] = gglua_bf16_bits(x[i]);
    }
}

void gglua_col_sum_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * a = dst->src[0];
    const int64_t ne0 = a->ne[0], rows = ggml_nrows(a);
    float * d = (float *) dst->data;
    int64_t c0, c1;
    gglua_share(ne0, ith, nth, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        d[c] = 0.0f;
    }
    for (int64_t r = 0; r < rows; r++) { // row by row: the reads stay in order
        for (int64_t c = c0; c < c1; c++) {
            d[c] += gglua_element(a, r * ne0 + c);
        }
    }
}
