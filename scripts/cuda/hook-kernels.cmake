# hook-kernels.cmake - gglua's CUDA kernels (gglua-kernels.cu) into ggml-cuda.
#
# ggml-cuda computes only the ops it knows: a custom node (GGML_OP_CUSTOM,
# how gglua adds kernels of its own) is unsupported there. So the build
# copies ggml's sources (the pinned module's, read-only) to GGLUA_GGML_COPY,
# adds gglua-kernels.cu/.cuh (and ggmlcgo/gglua_collective.h, the
# in-graph collectives' struct) to the copy's ggml-cuda folder (its CMakeLists
# globs *.cu), and inserts three lines into the copy's ggml-cuda.cu: the
# header, a GGML_OP_CUSTOM case in ggml_cuda_compute_forward and one in the
# device's supports_op; and it instantiates CUDA graphs with their kernels'
# own priorities (the gradients' sums run at a higher one). Each insertion
# point must be found exactly once, so
# a ggml that has moved them stops the build with a clear error instead of
# building a library without the kernels. gglua asks the library whether it
# runs each kernel (ggmlcgo's Backend.HasKernel) and composes ggml's own ops
# where it does not.
#
#   include() it with GGML_DIR and GGLUA_GGML_COPY set, or run it alone:
#   cmake -DGGML_DIR=... -DGGLUA_GGML_COPY=... -P scripts/cuda/hook-kernels.cmake

function(gglua_insert_before var anchor text)
  string(FIND "${${var}}" "${anchor}" first)
  string(FIND "${${var}}" "${anchor}" last REVERSE)
  if(first EQUAL -1 OR NOT first EQUAL last)
    message(FATAL_ERROR "hook-kernels: ggml-cuda.cu (${GGML_DIR}) has changed: this text is not in it exactly once:\n${anchor}")
  endif()
  string(REPLACE "${anchor}" "${text}${anchor}" out "${${var}}")
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# gglua_replace_all replaces every one of count occurrences of anchor by
# text; any other count stops the build, as gglua_insert_before does.
function(gglua_replace_all var anchor text count)
  string(LENGTH "${anchor}" len)
  set(rest "${${var}}")
  set(found 0)
  string(FIND "${rest}" "${anchor}" at)
  while(NOT at EQUAL -1)
    math(EXPR found "${found} + 1")
    math(EXPR at "${at} + ${len}")
    string(SUBSTRING "${rest}" ${at} -1 rest)
    string(FIND "${rest}" "${anchor}" at)
  endwhile()
  if(NOT found EQUAL count)
    message(FATAL_ERROR "hook-kernels: ggml-cuda.cu (${GGML_DIR}) has changed: this text is in it ${found} times, not ${count}:\n${anchor}")
  endif()
  string(REPLACE "${anchor}" "${text}" out "${${var}}")
  set(${var} "${out}" PARENT_SCOPE)
endfunction()

# gglua_write_if_changed keeps an unchanged file's timestamp (no rebuild).
function(gglua_write_if_changed path text)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${text}")
endfunction()

set(_hook_dir "${CMAKE_CURRENT_LIST_DIR}")
# A copy made from another ggml folder (a version bump) is removed first:
# file(COPY) only adds, and ggml-cuda's glob would compile stale files.
set(_stamp "${GGLUA_GGML_COPY}.from")
if(EXISTS "${_stamp}")
  file(READ "${_stamp}" _from)
  if(NOT _from STREQUAL GGML_DIR)
    file(REMOVE_RECURSE "${GGLUA_GGML_COPY}")
  endif()
endif()
gglua_write_if_changed("${_stamp}" "${GGML_DIR}")
file(COPY "${GGML_DIR}/" DESTINATION "${GGLUA_GGML_COPY}" NO_SOURCE_PERMISSIONS
  PATTERN "ggml-cuda.cu" EXCLUDE)
file(READ "${GGML_DIR}/src/ggml-cuda/ggml-cuda.cu" cu)
gglua_insert_before(cu [=[#include "ggml-cuda/fill.cuh"
]=] [=[#include "ggml-cuda/gglua-kernels.cuh"
]=])
gglua_insert_before(cu [=[        case GGML_OP_OPT_STEP_ADAMW:
            ggml_cuda_opt_step_adamw(ctx, dst);
]=] [=[        case GGML_OP_CUSTOM:
            if (!gglua_cuda_compute(ctx, dst)) {
                return false;
            }
            break;
]=])
gglua_insert_before(cu [=[        case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
        case GGML_OP_OPT_STEP_ADAMW:
]=] [=[        case GGML_OP_CUSTOM:
            return gglua_cuda_supports(op);
]=])
# A CUDA graph runs its kernels at the priority of the stream it is
# launched on unless instantiated to use each kernel node's own, which
# capture copies from the stream it was captured on: so that the gradients'
# sums, captured on the collective's high-priority stream
# (gglua-kernels.cu), keep their priority inside the step's CUDA graph.
gglua_replace_all(cu [=[cudaGraphInstantiate(&cuda_ctx->cuda_graph->instance, cuda_ctx->cuda_graph->graph, NULL, NULL, 0)]=]
  [=[cudaGraphInstantiateWithFlags(&cuda_ctx->cuda_graph->instance, cuda_ctx->cuda_graph->graph, cudaGraphInstantiateFlagUseNodePriority)]=] 2)
gglua_write_if_changed("${GGLUA_GGML_COPY}/src/ggml-cuda/ggml-cuda.cu" "${cu}")
foreach(f gglua-kernels.cu gglua-kernels.cuh gglua-flash-attn.cuh gglua-gemm.cuh gglua-layer-norm.cuh ../../ggmlcgo/gglua_collective.h)
  get_filename_component(_name "${f}" NAME)
  configure_file("${_hook_dir}/${f}" "${GGLUA_GGML_COPY}/src/ggml-cuda/${_name}" COPYONLY)
endforeach()
