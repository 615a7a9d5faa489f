// gglua_ops.h - gglua's own C kernels, run as ggml custom ops on the CPU.
#ifndef GGLUA_OPS_H
#define GGLUA_OPS_H
#include <string.h>

#include "gglua_collective.h"
#include "gglua_ggml.h"

// gglua_share is thread ith's part [*from, *to) of n items cut into nth
// contiguous blocks: how the row and element kernels split their work.
static inline void gglua_share(int64_t n, int ith, int nth, int64_t * from, int64_t * to) {
    const int64_t per = (n + nth - 1) / nth;
    *from = per * ith < n ? per * ith : n;
    *to = *from + per < n ? *from + per : n;
}

// gglua_round_bf16 is f rounded to bf16 (to nearest, ties to even; NaN
// stays a quiet NaN), as ggml's and PyTorch's conversions round, widened
// back to f32; gglua_bf16_bits is the same as bf16's 16 bits.
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

static inline uint16_t gglua_bf16_bits(float f) {
    const float r = gglua_round_bf16(f);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t) (u >> 16);
}

// gglua_element is element i of the contiguous tensor t, f32 or bf16
// (widened: exact).
static inline float gglua_element(const struct ggml_tensor * t, int64_t i) {
    if (t->type == GGML_TYPE_BF16) {
        const uint32_t u = (uint32_t) ((const uint16_t *) t->data)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return ((const float *) t->data)[i];
}

// gglua_transpose_f32 writes dst = the transpose of dst->src[0] (swapping
// ne0 and ne1 of a contiguous f32 tensor), splitting tiles over nth threads.
void gglua_transpose_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_all_reduce_f32 sums dst->src[0] (contiguous f32) across processes
// in place, with the gglua_collective at userdata (collective.c);
// gglua_all_reduce_join_f32 closes a graph's sums. Each writes one 0 into
// dst. gglua_scale_sum is a host_sum for tests: the values times *arg.
void gglua_all_reduce_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_all_reduce_join_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
int gglua_scale_sum(void * data, int64_t count, void * arg);
// The nodes: all_reduce of a with c (one float, 0), and all_reduce_join
// after the node after (c NULL: a probe's, never run).
struct ggml_tensor * gglua_all_reduce_node(struct ggml_context * ctx, struct ggml_tensor * a, gglua_collective * c);
struct ggml_tensor * gglua_all_reduce_join_node(struct ggml_context * ctx, struct ggml_tensor * after, gglua_collective * c);

// gglua_fill_values copies dst->ne[0] floats from userdata into dst.
void gglua_fill_values(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_gelu_erf_back_f32 writes dst = g · (Φ(x) + x φ(x)) for g, x =
// dst->src[0..1] (contiguous, of dst's shape; g f32, x f32 or bf16), Φ
// from erf; a bf16 dst takes it rounded. gglua_gelu_bf16_f32 writes dst
// (bf16) = x Φ(x), rounded, for x = dst->src[0] (f32 or bf16). The
// elements split over nth threads.
void gglua_gelu_erf_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_gelu_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_pad_f32 writes dst = dst->src[0] (contiguous f32) with zeros
// around it along one dim: userdata carries the dim (bits 40 and up) and
// the zeros before it (the low 40 bits); those after follow from the
// shapes. The rows are split over nth threads.
void gglua_pad_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_copy_rows_f32 writes dst = dst->src[0], an f32 view whose rows
// (ne0) are contiguous, packed; the rows are split over nth threads.
void gglua_copy_rows_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_window is a 2-d window (kernel, stride, padding, dilation, each
// {h, w}) from the eight 8-bit fields ggmlcgo's Window packs into a
// kernel's userdata, lowest byte first.
struct gglua_window {
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

static inline struct gglua_window gglua_window_of(void * userdata) {
    const uint64_t c = (uint64_t) (uintptr_t) userdata;
    struct gglua_window w = {(int64_t) (c & 255), (int64_t) (c >> 8 & 255), (int64_t) (c >> 16 & 255),
                             (int64_t) (c >> 24 & 255), (int64_t) (c >> 32 & 255), (int64_t) (c >> 40 & 255),
                             (int64_t) (c >> 48 & 255), (int64_t) (c >> 56 & 255)};
    return w;
}

// gglua_max_pool_f32 writes dst [N, C, OH, OW] = PyTorch's max_pool2d of
// dst->src[0] [N, C, H, W], and gglua_max_pool_back_f32 dst [N, C, H, W] =
// its gradient from g (src[0]) and the input (src[1]); both contiguous f32
// (pool.c).
void gglua_max_pool_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_max_pool_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_patches writes output rows [oy0, oy1) of the patches of one image
// x (c planes of h×w, packed) by the window k into cols: ow positions a
// row, each c·kh·kw values as ggml's im2col lays them out, zeros in the
// padding. gglua_patches_add zeroes out (c planes of h×w) and adds the
// patches cols (oh·ow positions) where gglua_patches takes them from: its
// adjoint. gglua_im2col_f32 writes dst [N, OH, OW, C·KH·KW] = the patches
// of dst->src[0] [N, C, H, W] (contiguous f32); gglua_col2im_f32 writes dst
// [N, C, H, W] = its adjoint of the patches dst->src[0] (patches.c).
void gglua_patches(const float * x, int64_t c, int64_t h, int64_t w, int64_t ow, struct gglua_window k, int64_t oy0, int64_t oy1,
                   float * cols);
void gglua_patches_add(const float * cols, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, struct gglua_window k,
                       float * out);
// gglua_patches_kp and gglua_patches_add_kp are the same with the patches
// transposed, [C·KH·KW, OH·OW]: each row's run read (written) from one
// input row, contiguous for stride 1, for the OpenBLAS convolution.
void gglua_patches_kp(const float * x, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, struct gglua_window k, float * cols);
void gglua_patches_add_kp(const float * cols, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow, struct gglua_window k,
                          float * out);
void gglua_im2col_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_col2im_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_relu_f32 writes dst = max(x, 0) for x = dst->src[0], NaN kept;
// gglua_relu_back_f32 writes dst = g where y > 0 or y is NaN, 0 elsewhere,
// for g, y = dst->src[0..1] (contiguous, of dst's shape; g f32, y relu's
// result in f32 or bf16); a bf16 dst takes it rounded.
void gglua_relu_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_relu_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_bias_relu_f32 writes dst = relu(a + bias) (NaN kept) for a =
// dst->src[0] (contiguous f32 of dst's shape) and bias = dst->src[1], one
// contiguous row of dst's ne0 added to every row: a linear layer's bias
// and relu in one pass; a bf16 dst takes the f32 result rounded. The rows
// are split over nth threads.
void gglua_bias_relu_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_adamw_f32 is ggml's opt_step_adamw, in place: dst is a view of the
// parameter dst->src[0], with its gradient, first and second moments and
// the 7 numbers [alpha, beta1, beta2, eps, wd, 1/(1-beta1^t), 1/(1-beta2^t)]
// as dst->src[1..4] (contiguous f32; the moments are written in place).
void gglua_adamw_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_adadelta_f32 is Adadelta's step, in place: dst is a view of the
// parameter, src[1..4] its gradient, square_avg, acc_delta (both updated)
// and the 5 numbers rho, 1 - rho, eps, weight_decay, -lr (adadelta.c).
void gglua_adadelta_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_gemm_bf16_f32 writes dst [M, N] = op(a) [M, K] · op(b) [K, N] for a,
// b = dst->src[0..1] (contiguous, f32 or bf16; every dim past ne0 counts as
// rows) with each f32 operand rounded to bf16 and the sums in f32 (a bf16
// dst takes them rounded);
// userdata points at two ints {ta, tb}: whether a and b are used
// transposed; a third source, an f32 row of N, is added to every row of
// the sums. The rows of dst are split over nth threads.
void gglua_gemm_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_round_bf16_f32 writes dst (bf16) = dst->src[0] (contiguous f32 of
// dst's shape) rounded to nearest, ties to even (NaN stays a quiet NaN),
// the elements split over nth threads.
void gglua_round_bf16_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_dequantize_f32 writes dst (contiguous f32) = dst->src[0], a
// contiguous tensor of a quantized type and dst's shape, dequantized; the
// rows split over nth threads.
void gglua_dequantize_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_dequantize_rows writes dst = the n values of type's blocks at src
// (whole blocks), in f32.
void gglua_dequantize_rows(int type, const void * src, float * dst, int64_t n);

// gglua_col_sum_f32 writes dst [ne0] (f32) = the sums over the rows of
// dst->src[0] (contiguous, f32 or bf16; every dim past ne0 a row), in f32,
// the columns split over nth threads.
void gglua_col_sum_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);

// gglua_layer_norm_f32 is layer_norm over ne0 with its rows' mean and
// 1/sd, gglua_layer_norm_back_f32 its gradients (layer_norm.c says the
// layouts and userdata); the nodes are named layer_norm and
// layer_norm_back, which gglua-kernels.cu matches. w and b may be NULL.
void gglua_layer_norm_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_layer_norm_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
struct ggml_tensor * gglua_layer_norm_node(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * w,
                                           struct ggml_tensor * b, uint64_t code);
struct ggml_tensor * gglua_layer_norm_back_node(struct ggml_context * ctx, struct ggml_tensor * g, struct ggml_tensor * x,
                                                struct ggml_tensor * stats, struct ggml_tensor * w, uint64_t code);

// gglua_flash_attn_f32 writes dst = softmax(q·kᵀ·scale [causal]) · v and
// its log-sum-exp, gglua_flash_attn_back_f32 the gradients for q, k and v
// (flash_attn.c says the layouts); userdata carries the scale's f32 bits
// (the low 32), causal (bit 32) and bf16 rounding (bit 33).
void gglua_flash_attn_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void gglua_flash_attn_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
// The nodes (named flash_attn and flash_attn_back, which
// gglua-flash-attn.cu matches): fwd is the forward's node, go the
// gradient of its output.
struct ggml_tensor * gglua_flash_attn_node(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                           struct ggml_tensor * v, uint64_t code);
struct ggml_tensor * gglua_flash_attn_back_node(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                                struct ggml_tensor * v, struct ggml_tensor * fwd, struct ggml_tensor * go, uint64_t code);

#endif
