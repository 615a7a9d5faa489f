// The CPU side of gglua's in-graph collectives (gglua_collective.h): a
// node that replaces its operand by its mean across the processes (the
// sum, then divided by their number), and the node that closes a graph's
// sums (a device waits there for its collective stream; the CPU's sums are
// done by then).
#include "gglua_collective.h"
#include "gglua_ops.h"

// scale multiplies count floats at v by k.
static void scale(float * v, int64_t count, float k) {
    for (int64_t i = 0; i < count; i++) {
        v[i] *= k;
    }
}

void gglua_all_reduce_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) nth;
    gglua_collective * c = userdata;
    if (ith != 0) {
        return;
    }
    ((float *) dst->data)[0] = 0;
    if (c->error != 0) { // an earlier sum failed: the processes are out of step
        return;
    }
    if (c->host_sum == NULL) {
        c->error = -1;
        c->error_kind = GGLUA_COLLECTIVE_HOST;
        return;
    }
    const struct ggml_tensor * a = dst->src[0];
    const int64_t n = ggml_nelements(a);
    const int rc = c->world < 1 ? -1 : c->host_sum(a->data, n, c->host_arg);
    if (rc != 0) {
        c->error = rc;
        c->error_kind = GGLUA_COLLECTIVE_HOST;
        return;
    }
    // As NCCL's average of floats, times 1/world (a power of two's is
    // exact: then the same as dividing first, as PyTorch DDP does).
    scale(a->data, n, 1.0f / (float) c->world);
}

void gglua_all_reduce_join_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) nth;
    (void) userdata;
    if (ith == 0) {
        ((float *) dst->data)[0] = 0;
    }
}

// gglua_scale_sum is a host_sum for tests and one process: count floats
// times *(float *) arg, as the sum of that many processes holding the same
// values would be.
int gglua_scale_sum(void * data, int64_t count, void * arg) {
    scale(data, count, *(const float *) arg);
    return 0;
}

// gglua_collective_probe is the collective the kernel probe's nodes name
// (never run).
static gglua_collective gglua_collective_probe;

struct ggml_tensor * gglua_all_reduce_node(struct ggml_context * ctx, struct ggml_tensor * a, gglua_collective * c) {
    struct ggml_tensor * args[1] = {a};
    struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, 1, 1, 1, 1, args, 1, gglua_all_reduce_f32, 1, c ? c : &gglua_collective_probe);
    ggml_set_name(t, "all_reduce_mean");
    return t;
}

struct ggml_tensor * gglua_all_reduce_join_node(struct ggml_context * ctx, struct ggml_tensor * after, gglua_collective * c) {
    struct ggml_tensor * args[1] = {after};
    struct ggml_tensor * t = ggml_custom_4d(ctx, GGML_TYPE_F32, 1, 1, 1, 1, args, 1, gglua_all_reduce_join_f32, 1, c ? c : &gglua_collective_probe);
    ggml_set_name(t, "all_reduce_join");
    return t;
}
