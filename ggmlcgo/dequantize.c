// gglua's dequantize node on the CPU: a quantized tensor's rows (llama.cpp's
// blocks) in f32, by ggml's own to_float of the type. gglua-kernels.cu runs
// the same node on a GPU with ggml-cuda's converters, which cover every
// type gglua reads where ggml-cuda's copy and get_rows do not (K-quants).
#include "gglua_ops.h"

void gglua_dequantize_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const struct ggml_tensor * a = dst->src[0];
    const int64_t ne0 = a->ne[0], rows = ggml_nrows(a);
    ggml_to_float_t to_float = ggml_get_type_traits(a->type)->to_float;
    int64_t r0, r1;
    gglua_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        to_float((const char *) a->data + r * a->nb[1], (float *) dst->data + r * ne0, ne0);
    }
}

void gglua_dequantize_rows(int type, const void * src, float * dst, int64_t n) {
    ggml_get_type_traits((enum ggml_type) type)->to_float(src, dst, n);
}
