#!/usr/bin/env bash
# scripts/build-cuda.sh - build libggml-cuda.so (and the libggml-base.so it
# links) from the pinned module's ggml sources, into the folder of gglua.
#
#   scripts/build-cuda.sh [out-dir]        (default: bin/, beside bin/gglua)
#
# GGML_DIR: the sources (default: found with `go list -m`); CUDA_ARCHITECTURES:
# nvcc targets (default: native; 90 for an H100/H200); JOBS: parallel jobs.
# Then run: gglua --device cuda script.lua (or set GGLUA_BACKEND_PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bin}
if [ -z "${GGML_DIR:-}" ]; then
  mod=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
  GGML_DIR=$mod/ml/backend/ggml/ggml
fi
build=${BUILD_DIR:-build/cuda}
cmake -S scripts/cuda -B "$build" -DGGML_DIR="$GGML_DIR" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-native}" ${CMAKE_GENERATOR:+-G "$CMAKE_GENERATOR"} >/dev/null
cmake --build "$build" --target ggml-cuda -j "${JOBS:-$(nproc)}"
mkdir -p "$out"
if [ "$(realpath "$out")" != "$(realpath "$build/lib")" ]; then
  cp "$build"/lib/libggml-cuda.so "$build"/lib/libggml-base.so* "$out"/
fi
echo "built $out/libggml-cuda.so"
