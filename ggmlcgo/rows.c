// Row copies for the CPU backend, run as ggml custom ops. Zero padding along
// one dim:
// the gradient of a narrow (a chunk of qkv, a slice) is its piece padded
// back to the whole. ggml's own pad visits the output element by element
// with the outermost dim innermost; here each output row is one memset or
// memcpy, and the threads take contiguous blocks of rows.
#include <string.h>

#include "gglua_ops.h"

// row_index is the position (i[1], i[2], i[3]) of row r of a tensor of ne.
static void row_index(int64_t r, const int64_t * ne, int64_t * i) {
    i[1] = r % ne[1];
    i[2] = (r / ne[1]) % ne[2];
    i[3] = r / (ne[1] * ne[2]);
}

void gglua_pad_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    const struct ggml_tensor * src = dst->src[0];
    const uint64_t code = (uint64_t) (uintptr_t) userdata;
    const int dim = (int) (code >> 40);
    int64_t before[4] = {0, 0, 0, 0};
    before[dim] = (int64_t) (code & ((1ull << 40) - 1));
    const int64_t * ne = dst->ne;
    const int64_t * sn = src->ne;
    int64_t r0, r1;
    gglua_share(ne[1] * ne[2] * ne[3], ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float * d = (float *) dst->data + r * ne[0];
        int64_t i[4];
        row_index(r, ne, i);
        const int64_t s1 = i[1] - before[1], s2 = i[2] - before[2], s3 = i[3] - before[3];
        if (s1 < 0 || s1 >= sn[1] || s2 < 0 || s2 >= sn[2] || s3 < 0 || s3 >= sn[3]) {
            memset(d, 0, (size_t) ne[0] * sizeof(float));
            continue;
        }
        const float * s = (const float *) src->data + ((s3 * sn[2] + s2) * sn[1] + s1) * sn[0];
        memset(d, 0, (size_t) before[0] * sizeof(float));
        memcpy(d + before[0], s, (size_t) sn[0] * sizeof(float));
        memset(d + before[0] + sn[0], 0, (size_t) (ne[0] - before[0] - sn[0]) * sizeof(float));
    }
}

// gglua_copy_rows_f32 packs a strided view whose rows (ne0) are contiguous
// (a permutation of the outer dims: attention's heads moved next to the
// batch, a narrow) into dst, one memcpy per row. ggml's copy of such a
// view went element by element.
void gglua_copy_rows_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * src = dst->src[0];
    const int64_t * ne = dst->ne;
    int64_t r0, r1;
    gglua_share(ne[1] * ne[2] * ne[3], ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i[4];
        row_index(r, ne, i);
        const char * s = (const char *) src->data + i[1] * src->nb[1] + i[2] * src->nb[2] + i[3] * src->nb[3];
        memcpy((float *) dst->data + r * ne[0], s, (size_t) ne[0] * sizeof(float));
    }
}
