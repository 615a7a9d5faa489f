// Compiled by abi_test.go together with the pinned module's real headers.
// Every prototype of gglua_ggml.h is redeclared after ggml's own, so any
// difference is a "conflicting types" error; every struct and enum value that
// gglua mirrors is compared with a static_assert.
#include <assert.h>
#include <stddef.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include "ggml-impl.h" // ggml's own sources: the custom op's parameter struct

#define GGLUA_ABI_CHECK
#include "gglua_ggml.h"

#define SAME_VALUE(name, value) static_assert((int)(name) == (value), "enum value " #name " differs from ggml");
GGLUA_ENUM_GGML_TYPE(SAME_VALUE)
GGLUA_ENUM_GGML_STATUS(SAME_VALUE)
GGLUA_ENUM_GGML_LOG_LEVEL(SAME_VALUE)
GGLUA_ENUM_GGML_SCHED_PRIORITY(SAME_VALUE)
GGLUA_ENUM_GGML_BACKEND_DEV_TYPE(SAME_VALUE)
GGLUA_ENUM_GGUF_TYPE(SAME_VALUE)
GGLUA_ENUM_GGML_OP(SAME_VALUE)

static_assert(GGLUA_MAX_DIMS == GGML_MAX_DIMS, "GGML_MAX_DIMS");
static_assert(GGLUA_MAX_SRC == GGML_MAX_SRC, "GGML_MAX_SRC");
static_assert(GGLUA_MAX_OP_PARAMS == GGML_MAX_OP_PARAMS, "GGML_MAX_OP_PARAMS");
static_assert(GGLUA_MAX_NAME == GGML_MAX_NAME, "GGML_MAX_NAME");
static_assert(GGLUA_MAX_N_THREADS == GGML_MAX_N_THREADS, "GGML_MAX_N_THREADS");
static_assert(sizeof(enum ggml_type) == sizeof(int), "enum ggml_type is int-sized");
static_assert(sizeof(ggml_fp16_t) == 2 && sizeof(ggml_bf16_t) == 2, "half types");

#define SAME_SIZE(tag) \
    static_assert(sizeof(struct tag) == sizeof(struct gglua_mirror_##tag), "sizeof(struct " #tag ") differs from ggml");
#define SAME_FIELD(tag, f)                                                                   \
    static_assert(offsetof(struct tag, f) == offsetof(struct gglua_mirror_##tag, f) &&       \
                      sizeof(((struct tag *)0)->f) == sizeof(((struct gglua_mirror_##tag *)0)->f), \
                  "field " #tag "." #f " differs from ggml");

SAME_SIZE(ggml_init_params)
SAME_FIELD(ggml_init_params, mem_size)
SAME_FIELD(ggml_init_params, mem_buffer)
SAME_FIELD(ggml_init_params, no_alloc)

SAME_SIZE(ggml_tensor)
SAME_FIELD(ggml_tensor, type)
SAME_FIELD(ggml_tensor, buffer)
SAME_FIELD(ggml_tensor, ne)
SAME_FIELD(ggml_tensor, nb)
SAME_FIELD(ggml_tensor, op)
SAME_FIELD(ggml_tensor, op_params)
SAME_FIELD(ggml_tensor, flags)
SAME_FIELD(ggml_tensor, src)
SAME_FIELD(ggml_tensor, view_src)
SAME_FIELD(ggml_tensor, view_offs)
SAME_FIELD(ggml_tensor, data)
SAME_FIELD(ggml_tensor, name)
SAME_FIELD(ggml_tensor, extra)

SAME_SIZE(ggml_type_traits)
SAME_FIELD(ggml_type_traits, type_name)
SAME_FIELD(ggml_type_traits, blck_size)
SAME_FIELD(ggml_type_traits, blck_size_interleave)
SAME_FIELD(ggml_type_traits, type_size)
SAME_FIELD(ggml_type_traits, is_quantized)
SAME_FIELD(ggml_type_traits, to_float)
SAME_FIELD(ggml_type_traits, from_float_ref)

SAME_SIZE(ggml_tallocr)
SAME_FIELD(ggml_tallocr, buffer)
SAME_FIELD(ggml_tallocr, base)
SAME_FIELD(ggml_tallocr, alignment)
SAME_FIELD(ggml_tallocr, offset)

SAME_SIZE(ggml_threadpool_params)
SAME_FIELD(ggml_threadpool_params, cpumask)
SAME_FIELD(ggml_threadpool_params, n_threads)
SAME_FIELD(ggml_threadpool_params, prio)
SAME_FIELD(ggml_threadpool_params, poll)
SAME_FIELD(ggml_threadpool_params, strict_cpu)
SAME_FIELD(ggml_threadpool_params, paused)

SAME_SIZE(gguf_init_params)
SAME_FIELD(gguf_init_params, no_alloc)
SAME_FIELD(gguf_init_params, ctx)

// A custom node's parameters (ggml-impl.h), which graph_replay.c reads
// field by field.
#define SAME_CUSTOM_FIELD(f)                                                                                \
    static_assert(offsetof(struct ggml_custom_op_params, f) == offsetof(struct gglua_custom_op_params, f) && \
                      sizeof(((struct ggml_custom_op_params *)0)->f) == sizeof(((struct gglua_custom_op_params *)0)->f), \
                  "field ggml_custom_op_params." #f " differs from ggml");
static_assert(sizeof(struct ggml_custom_op_params) == sizeof(struct gglua_custom_op_params), "sizeof(struct ggml_custom_op_params) differs from ggml");
SAME_CUSTOM_FIELD(fun)
SAME_CUSTOM_FIELD(n_tasks)
SAME_CUSTOM_FIELD(userdata)
