#!/usr/bin/env bash
# scripts/build-cuda.sh - build libggml-cuda.so (and the libggml-base.so it
# links) from the pinned module's ggml sources, into the folder of gglua.
#
#   scripts/build-cuda.sh [out-dir]        (default: bin/, beside bin/gglua)
#
# GGML_DIR: the sources (default: found with `go list -m`); CUDA_ARCHITECTURES:
# nvcc targets (default: native; 90 for an H100/H200); JOBS: parallel jobs.
# Then run: gglua --device cuda script.lua (or set GGLUA_BACKEND_PATH).
#
# The build takes minutes, so each phase prints a line (with the seconds so
# far) and the compile shows cmake's own progress: "[ 42%] Building ..." with
# make, "[12/80] ..." with Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
phase() { printf '==> [%ds] %s\n' "$SECONDS" "$*"; }
out=${1:-bin}
if [ -z "${GGML_DIR:-}" ]; then
  phase "finding ggml's sources (go list -m github.com/ollama/ollama)"
  mod=$(go list -m -f '{{.Dir}}' github.com/ollama/ollama)
  GGML_DIR=$mod/ml/backend/ggml/ggml
fi
build=${BUILD_DIR:-build/cuda}
jobs=${JOBS:-$(nproc)}
phase "configuring $build with cmake (ggml: $GGML_DIR)"
cmake -S scripts/cuda -B "$build" -DGGML_DIR="$GGML_DIR" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-native}" ${CMAKE_GENERATOR:+-G "$CMAKE_GENERATOR"} >/dev/null
phase "compiling ggml-cuda with $jobs jobs (minutes; cmake shows its progress)"
cmake --build "$build" --target ggml-cuda -j "$jobs"
mkdir -p "$out"
if [ "$(realpath "$out")" != "$(realpath "$build/lib")" ]; then
  phase "copying the libraries to $out/"
  cp "$build"/lib/libggml-cuda.so "$build"/lib/libggml-base.so* "$out"/
fi
phase "built $out/libggml-cuda.so"
