// gglua_ggml.h - the subset of the ggml C API that gglua calls.
//
// cgo cannot reach the include folder of another Go module, so gglua declares
// what it uses here. abi_test.go compiles this file in one translation unit with
// the real headers of the pinned module (ollama v0.24.0): a prototype that
// differs from ggml's is a "conflicting types" error, and every struct and enum
// value below is checked with static_asserts. A version bump that changes the
// ABI therefore fails a test instead of corrupting memory.
//
// Under GGLUA_ABI_CHECK the real headers are already included: the enums and
// typedefs below are skipped, and the structs take a gglua_mirror_ prefix so
// that they can be compared field by field with the real ones.
#ifndef GGLUA_GGML_H
#define GGLUA_GGML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGLUA_MAX_DIMS 4
#define GGLUA_MAX_SRC 10
#define GGLUA_MAX_OP_PARAMS 64
#define GGLUA_MAX_NAME 64
#define GGLUA_MAX_N_THREADS 512

#ifdef GGLUA_ABI_CHECK
#define GGLUA_MIRROR(tag) gglua_mirror_##tag
#else
#define GGLUA_MIRROR(tag) tag
#endif

// Enum values, as X-macros so the ABI test can assert each against ggml's.
#define GGLUA_ENUM_GGML_TYPE(X) \
    X(GGML_TYPE_F32, 0)         \
    X(GGML_TYPE_F16, 1)         \
    X(GGML_TYPE_Q4_0, 2)        \
    X(GGML_TYPE_Q4_1, 3)        \
    X(GGML_TYPE_Q5_0, 6)        \
    X(GGML_TYPE_Q5_1, 7)        \
    X(GGML_TYPE_Q8_0, 8)        \
    X(GGML_TYPE_Q4_K, 12)       \
    X(GGML_TYPE_Q5_K, 13)       \
    X(GGML_TYPE_Q6_K, 14)       \
    X(GGML_TYPE_I32, 26)        \
    X(GGML_TYPE_BF16, 30)       \
    X(GGML_TYPE_COUNT, 40)

#define GGLUA_ENUM_GGML_STATUS(X)      \
    X(GGML_STATUS_ALLOC_FAILED, -2)    \
    X(GGML_STATUS_FAILED, -1)          \
    X(GGML_STATUS_SUCCESS, 0)          \
    X(GGML_STATUS_ABORTED, 1)

#define GGLUA_ENUM_GGML_LOG_LEVEL(X) \
    X(GGML_LOG_LEVEL_NONE, 0)        \
    X(GGML_LOG_LEVEL_DEBUG, 1)       \
    X(GGML_LOG_LEVEL_INFO, 2)        \
    X(GGML_LOG_LEVEL_WARN, 3)        \
    X(GGML_LOG_LEVEL_ERROR, 4)       \
    X(GGML_LOG_LEVEL_CONT, 5)

#define GGLUA_ENUM_GGML_SCHED_PRIORITY(X) \
    X(GGML_SCHED_PRIO_LOW, -1)            \
    X(GGML_SCHED_PRIO_NORMAL, 0)          \
    X(GGML_SCHED_PRIO_MEDIUM, 1)          \
    X(GGML_SCHED_PRIO_HIGH, 2)            \
    X(GGML_SCHED_PRIO_REALTIME, 3)

#define GGLUA_ENUM_GGML_BACKEND_DEV_TYPE(X)   \
    X(GGML_BACKEND_DEVICE_TYPE_CPU, 0)        \
    X(GGML_BACKEND_DEVICE_TYPE_GPU, 1)        \
    X(GGML_BACKEND_DEVICE_TYPE_IGPU, 2)       \
    X(GGML_BACKEND_DEVICE_TYPE_ACCEL, 3)

// The ops that only describe memory (ggml computes nothing for them), the
// custom op (whose parameters graph_replay.c reads field by field), and the
// gradients ggml's CPU kernels get wrong when computed in place
// (graph.go's gglua_graph_guard_inplace).
#define GGLUA_ENUM_GGML_OP(X) \
    X(GGML_OP_NONE, 0)          \
    X(GGML_OP_RMS_NORM_BACK, 26) \
    X(GGML_OP_SOFT_MAX_BACK, 47) \
    X(GGML_OP_RESHAPE, 36)      \
    X(GGML_OP_VIEW, 37)         \
    X(GGML_OP_PERMUTE, 38)      \
    X(GGML_OP_TRANSPOSE, 39)    \
    X(GGML_OP_CUSTOM, 89)

#define GGLUA_ENUM_GGUF_TYPE(X) \
    X(GGUF_TYPE_UINT8, 0)       \
    X(GGUF_TYPE_INT8, 1)        \
    X(GGUF_TYPE_UINT16, 2)      \
    X(GGUF_TYPE_INT16, 3)       \
    X(GGUF_TYPE_UINT32, 4)      \
    X(GGUF_TYPE_INT32, 5)       \
    X(GGUF_TYPE_FLOAT32, 6)     \
    X(GGUF_TYPE_BOOL, 7)        \
    X(GGUF_TYPE_STRING, 8)      \
    X(GGUF_TYPE_ARRAY, 9)       \
    X(GGUF_TYPE_UINT64, 10)     \
    X(GGUF_TYPE_INT64, 11)      \
    X(GGUF_TYPE_FLOAT64, 12)

#ifndef GGLUA_ABI_CHECK

#define GGLUA_ENUMERATOR(name, value) name = value,

enum ggml_type { GGLUA_ENUM_GGML_TYPE(GGLUA_ENUMERATOR) };
enum ggml_status { GGLUA_ENUM_GGML_STATUS(GGLUA_ENUMERATOR) };
enum ggml_log_level { GGLUA_ENUM_GGML_LOG_LEVEL(GGLUA_ENUMERATOR) };
enum ggml_sched_priority { GGLUA_ENUM_GGML_SCHED_PRIORITY(GGLUA_ENUMERATOR) };
enum ggml_backend_dev_type { GGLUA_ENUM_GGML_BACKEND_DEV_TYPE(GGLUA_ENUMERATOR) };
enum gguf_type { GGLUA_ENUM_GGUF_TYPE(GGLUA_ENUMERATOR) };

struct ggml_context;
struct ggml_cgraph;
struct ggml_threadpool;
struct gguf_context;
enum ggml_op { GGLUA_ENUM_GGML_OP(GGLUA_ENUMERATOR) };

typedef uint16_t ggml_fp16_t;
typedef struct { uint16_t bits; } ggml_bf16_t;
typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer * ggml_backend_buffer_t;
typedef struct ggml_backend * ggml_backend_t;
typedef struct ggml_backend_reg * ggml_backend_reg_t;
typedef struct ggml_backend_device * ggml_backend_dev_t;
typedef struct ggml_backend_event * ggml_backend_event_t;
typedef struct ggml_gallocr * ggml_gallocr_t;
typedef struct ggml_threadpool * ggml_threadpool_t;
typedef bool (*ggml_abort_callback)(void * data);
typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t k);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t k);

#endif // GGLUA_ABI_CHECK

// ---- structs whose layout gglua relies on ----

struct GGLUA_MIRROR(ggml_init_params) {
    size_t mem_size;
    void * mem_buffer;
    bool   no_alloc;
};

struct GGLUA_MIRROR(ggml_tensor) {
    enum ggml_type type;
    struct ggml_backend_buffer * buffer;
    int64_t ne[GGLUA_MAX_DIMS];
    size_t  nb[GGLUA_MAX_DIMS];
    enum ggml_op op;
    int32_t op_params[GGLUA_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;
    struct ggml_tensor * src[GGLUA_MAX_SRC];
    struct ggml_tensor * view_src;
    size_t view_offs;
    void * data;
    char name[GGLUA_MAX_NAME];
    void * extra;
    char padding[8];
};

struct GGLUA_MIRROR(ggml_tallocr) {
    ggml_backend_buffer_t buffer;
    void * base;
    size_t alignment;
    size_t offset;
};

struct GGLUA_MIRROR(ggml_threadpool_params) {
    bool cpumask[GGLUA_MAX_N_THREADS];
    int n_threads;
    enum ggml_sched_priority prio;
    uint32_t poll;
    bool strict_cpu;
    bool paused;
};

struct GGLUA_MIRROR(gguf_init_params) {
    bool no_alloc;
    struct ggml_context ** ctx;
};

struct GGLUA_MIRROR(ggml_type_traits) {
    const char * type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ggml_to_float_t to_float;
    ggml_from_float_t from_float_ref;
};

// ---- ggml.h: contexts, tensors, graphs, conversions, logging ----

size_t ggml_tensor_overhead(void);
const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type);
size_t ggml_graph_overhead_custom(size_t size, bool grads);
struct ggml_context * ggml_init(struct ggml_init_params params);
void ggml_free(struct ggml_context * ctx);
size_t ggml_used_mem(const struct ggml_context * ctx);
size_t ggml_get_mem_size(const struct ggml_context * ctx);

struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims, const int64_t * ne);
struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name);
struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx);
struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor);
struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name);
const char * ggml_get_name(const struct ggml_tensor * tensor);
int64_t ggml_nelements(const struct ggml_tensor * tensor);
int64_t ggml_nrows(const struct ggml_tensor * tensor);
size_t ggml_nbytes(const struct ggml_tensor * tensor);
size_t ggml_type_size(enum ggml_type type);
size_t ggml_row_size(enum ggml_type type, int64_t ne);
size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows, int64_t n_per_row, const float * imatrix);
int64_t ggml_blck_size(enum ggml_type type);
const char * ggml_type_name(enum ggml_type type);
const char * ggml_status_to_string(enum ggml_status status);
const char * ggml_op_desc(const struct ggml_tensor * t);
void ggml_set_param(struct ggml_tensor * tensor);

// ops (ggml.h); each is wrapped in ops.go with the checks ggml would assert.
// Elementwise unary ops need nothing more than their name in this list:
// ops.go reaches them all through one Context.Unary(name, a).
#define GGLUA_UNARY_OPS(X) \
    X(exp) X(expm1) X(log) X(sqrt) X(sqr) X(abs) X(sgn) X(step) X(relu) X(sigmoid) X(tanh) X(silu) X(gelu_erf) X(floor) X(ceil) X(round) X(trunc) X(sin) X(cos)
// Other one-operand ops, each with its own wrapper.
#define GGLUA_ONE_OPERAND_OPS(X) \
    X(cont) X(transpose) X(sum) X(sum_rows) X(soft_max) X(argmax)
#define GGLUA_DECLARE_UNARY(name) struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a);
GGLUA_UNARY_OPS(GGLUA_DECLARE_UNARY)
GGLUA_ONE_OPERAND_OPS(GGLUA_DECLARE_UNARY)

#define GGLUA_BINARY_OPS(X) \
    X(add) X(sub) X(mul) X(div) X(mul_mat) X(repeat) X(repeat_back) \
    X(cpy) X(get_rows) X(cross_entropy_loss) X(silu_back) X(out_prod)
#define GGLUA_DECLARE_BINARY(name) struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGLUA_BINARY_OPS(GGLUA_DECLARE_BINARY)

struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c, int n_dims, int mode, int n_ctx_orig,
                                   float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow);
struct ggml_tensor * ggml_rope_ext_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c, int n_dims, int mode,
                                        int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                        float beta_slow);
struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_acc(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s);
struct ggml_tensor * ggml_scale_bias(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b);
struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
struct ggml_tensor * ggml_fill(struct ggml_context * ctx, struct ggml_tensor * a, float c);
struct ggml_tensor * ggml_arange(struct ggml_context * ctx, float start, float stop, float step);
struct ggml_tensor * ggml_repeat_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1, int axis2, int axis3);
struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int dim);
struct ggml_tensor * ggml_get_rows_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c);
struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * mask, float scale, float max_bias);
struct ggml_tensor * ggml_soft_max_ext_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, float scale, float max_bias);
struct ggml_tensor * ggml_cross_entropy_loss_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c);
struct ggml_tensor * ggml_opt_step_adamw(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * grad, struct ggml_tensor * m, struct ggml_tensor * v, struct ggml_tensor * adamw_params);
struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * cgraph, int i);
struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type);
typedef void (*ggml_custom_op_t)(struct ggml_tensor * dst, int ith, int nth, void * userdata);
// What ggml_custom_4d stores in its node's op_params: ggml-impl.h's
// struct ggml_custom_op_params (not in ggml's public headers; abi_check.c
// includes that one from ggml's sources to compare). ggml copies the struct
// whole, padding after n_tasks included, which C leaves unset: a node's
// parameters must be read field by field.
struct gglua_custom_op_params {
    ggml_custom_op_t fun;
    int n_tasks;
    void * userdata;
};
struct ggml_tensor * ggml_custom_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                    struct ggml_tensor ** args, int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata);
struct ggml_tensor * ggml_custom_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor ** args, int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata);
struct ggml_tensor * ggml_pad_ext(struct ggml_context * ctx, struct ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);
struct ggml_tensor * ggml_set_2d_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, size_t nb1, size_t offset);
struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, struct ggml_tensor * c);
struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
void ggml_set_output(struct ggml_tensor * tensor);
struct ggml_tensor * ggml_rms_norm_back(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, float eps);
struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);

struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads);
void ggml_build_forward_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);
int ggml_graph_size(struct ggml_cgraph * cgraph);
int ggml_graph_n_nodes(struct ggml_cgraph * cgraph);
void ggml_graph_clear(struct ggml_cgraph * cgraph);
void ggml_graph_add_node(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);

void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);
void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n);
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n);

void ggml_log_set(ggml_log_callback log_callback, void * user_data);

struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads);

// ---- ggml-cpu.h: the CPU backend and its threadpool ----

ggml_backend_t ggml_backend_cpu_init(void);
void ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads);
void ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool);
void ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu, ggml_abort_callback abort_callback, void * abort_callback_data);
struct ggml_threadpool * ggml_threadpool_new(struct ggml_threadpool_params * params);
void ggml_threadpool_free(struct ggml_threadpool * threadpool);
int ggml_threadpool_get_n_threads(struct ggml_threadpool * threadpool);
void ggml_threadpool_pause(struct ggml_threadpool * threadpool);
void ggml_threadpool_resume(struct ggml_threadpool * threadpool);
int ggml_cpu_has_sse3(void);
int ggml_cpu_has_avx(void);
int ggml_cpu_has_avx2(void);
int ggml_cpu_has_f16c(void);
int ggml_cpu_has_fma(void);
int ggml_cpu_has_avx512(void);
int ggml_cpu_has_neon(void);

// ---- ggml-backend.h: backends, devices, buffers ----

const char * ggml_backend_name(ggml_backend_t backend);
void ggml_backend_free(ggml_backend_t backend);
ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend);
ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend);
enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph);
enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph * cgraph, int batch_size);
void ggml_backend_synchronize(ggml_backend_t backend);
ggml_backend_event_t ggml_backend_event_new(ggml_backend_dev_t device);
void ggml_backend_event_free(ggml_backend_event_t event);
void ggml_backend_event_record(ggml_backend_event_t event, ggml_backend_t backend);
void ggml_backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event);
bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor * op);

const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft);
size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor * tensor);

void ggml_backend_buffer_free(ggml_backend_buffer_t buffer);
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer);
void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer);
size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer);
void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value);
size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer);
size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const struct ggml_tensor * tensor);

void ggml_backend_tensor_set(struct ggml_tensor * tensor, const void * data, size_t offset, size_t size);
void ggml_backend_tensor_get(const struct ggml_tensor * tensor, void * data, size_t offset, size_t size);
void ggml_backend_tensor_set_async(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data, size_t offset, size_t size);
void ggml_backend_tensor_get_async(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data, size_t offset, size_t size);
enum ggml_status ggml_backend_view_init(struct ggml_tensor * tensor);
enum ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor, void * addr);
void ggml_backend_tensor_memset(struct ggml_tensor * tensor, uint8_t value, size_t offset, size_t size);

size_t ggml_backend_dev_count(void);
ggml_backend_dev_t ggml_backend_dev_get(size_t index);
ggml_backend_dev_t ggml_backend_dev_by_name(const char * name);
const char * ggml_backend_dev_name(ggml_backend_dev_t device);
const char * ggml_backend_dev_description(ggml_backend_dev_t device);
void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total);
enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device);
ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params);
ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device);
ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device);
const char * ggml_backend_reg_name(ggml_backend_reg_t reg);
ggml_backend_reg_t ggml_backend_load(const char * path);

// ---- ggml-alloc.h ----

struct ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer);
enum ggml_status ggml_tallocr_alloc(struct ggml_tallocr * talloc, struct ggml_tensor * tensor);
ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
void ggml_gallocr_free(ggml_gallocr_t galloc);
bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
void ggml_gallocr_reserve_n_size(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids,
                                 const int * leaf_buffer_ids, size_t * sizes);
size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id);
size_t ggml_backend_alloc_ctx_tensors_from_buft_size(struct ggml_context * ctx, ggml_backend_buffer_type_t buft);
struct ggml_backend_buffer * ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context * ctx, ggml_backend_buffer_type_t buft);

// ---- gguf.h ----

struct gguf_context * gguf_init_empty(void);
struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params);
void gguf_free(struct gguf_context * ctx);
size_t gguf_get_data_offset(const struct gguf_context * ctx);
int64_t gguf_get_n_kv(const struct gguf_context * ctx);
int64_t gguf_find_key(const struct gguf_context * ctx, const char * key);
const char * gguf_get_key(const struct gguf_context * ctx, int64_t key_id);
enum gguf_type gguf_get_kv_type(const struct gguf_context * ctx, int64_t key_id);
enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id);
const char * gguf_get_val_str(const struct gguf_context * ctx, int64_t key_id);
uint32_t gguf_get_val_u32(const struct gguf_context * ctx, int64_t key_id);
float gguf_get_val_f32(const struct gguf_context * ctx, int64_t key_id);
const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id);
size_t gguf_get_arr_n(const struct gguf_context * ctx, int64_t key_id);
const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id);
const char * gguf_get_arr_str(const struct gguf_context * ctx, int64_t key_id, size_t i);
int64_t gguf_get_n_tensors(const struct gguf_context * ctx);
int64_t gguf_find_tensor(const struct gguf_context * ctx, const char * name);
size_t gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id);
const char * gguf_get_tensor_name(const struct gguf_context * ctx, int64_t tensor_id);
enum ggml_type gguf_get_tensor_type(const struct gguf_context * ctx, int64_t tensor_id);
size_t gguf_get_tensor_size(const struct gguf_context * ctx, int64_t tensor_id);
void gguf_set_val_str(struct gguf_context * ctx, const char * key, const char * val);
void gguf_set_val_u32(struct gguf_context * ctx, const char * key, uint32_t val);
void gguf_set_val_f32(struct gguf_context * ctx, const char * key, float val);
void gguf_set_val_i32(struct gguf_context * ctx, const char * key, int32_t val);
void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool val);
void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n);
void gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n);
void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);
bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta);

// ---- ggml.h: convolution (ggmlcgo/conv.go) ----

struct ggml_tensor * ggml_im2col(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum ggml_type dst_type);

#endif // GGLUA_GGML_H
