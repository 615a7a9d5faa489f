// gglua-kernels.cuh - gglua's CUDA kernels for the custom ops gglua builds
// (relu, relu_back, gelu_bf16, gelu_back, bias_relu, gemm_bf16_* (gglua-gemm.cuh), col_sum, to_bf16, flash_attn,
// layer_norm and their gradients, dequantize), hooked into a copy of ggml-cuda.cu by
// hook-kernels.cmake. A custom node is matched by its name and checked
// (types, shapes, contiguity) before it is claimed: anything else stays
// unsupported, as in a stock ggml-cuda.
#pragma once

#include "common.cuh"

// gglua_cuda_supports reports whether dst, a GGML_OP_CUSTOM node, is one of
// gglua's ops with operands these kernels take.
bool gglua_cuda_supports(const ggml_tensor * dst);

// gglua_cuda_compute runs dst on ctx's stream; false if it is not one of
// gglua's ops (ggml-cuda then reports the op as unsupported).
bool gglua_cuda_compute(ggml_backend_cuda_context & ctx, ggml_tensor * dst);
