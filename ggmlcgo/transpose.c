// A cache-blocked f32 transpose for the CPU backend, run as a ggml custom
// op. ggml's own cont(transpose(x)) copies element by element with a
// memcpy each, which measured as the largest copy cost of a training step.
#include "gglua_ops.h"

void gglua_transpose_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * src = dst->src[0];
    const int64_t cols = src->ne[0], rows = src->ne[1];
    const int64_t batches = src->ne[2] * src->ne[3];
    const float * s = (const float *) src->data;
    float * d = (float *) dst->data;
    const int64_t tile = 32;
    const int64_t row_tiles = (rows + tile - 1) / tile;
    for (int64_t job = ith; job < batches * row_tiles; job += nth) {
        const int64_t b = job / row_tiles;
        const int64_t r0 = (job % row_tiles) * tile;
        const int64_t r1 = r0 + tile < rows ? r0 + tile : rows;
        const float * sb = s + b * rows * cols;
        float * db = d + b * rows * cols;
        for (int64_t c0 = 0; c0 < cols; c0 += tile) {
            const int64_t c1 = c0 + tile < cols ? c0 + tile : cols;
            for (int64_t r = r0; r < r1; r++) {
                for (int64_t c = c0; c < c1; c++) {
                    db[c * rows + r] = sb[r * cols + c];
                }
            }
        }
    }
}

// gglua_fill_values writes the floats userdata points at into dst: numbers
// known when the graph is built (a learning rate, bias corrections) become
// one node, as op parameters do, instead of a chain of fills.
void gglua_fill_values(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) nth;
    if (ith != 0) {
        return;
    }
    const float * v = (const float *) userdata;
    float * d = (float *) dst->data;
    for (int64_t i = 0; i < dst->ne[0]; i++) {
        d[i] = v[i];
    }
}
