#!/usr/bin/env bash
# scripts/reference/llama_ref.sh - the reference that checks gglua's llm
# library: llama.cpp itself, built by someone else. Into .llama-ref/ (git
# ignores it) it installs npm's node-llama-cpp@3.21.1 (llama.cpp's source at
# release v0.4.0 as a git bundle, with its vocabulary files and test
# vectors) and @node-llama-cpp/linux-x64@3.21.1 (that release's prebuilt
# libllama and ggml backends for x86-64 Linux), unpacks the source, and
# compiles scripts/reference/llama_logits.c against the prebuilt library.
# The llm tests read .llama-ref/ (or GGLUA_LLAMA_REF); .ci/run runs this.
set -euo pipefail
cd "$(dirname "$0")/../.."
ref=${GGLUA_LLAMA_REF:-$PWD/.llama-ref}
mkdir -p "$ref"
if [ ! -d "$ref/npm/node_modules/@node-llama-cpp/linux-x64" ]; then
  mkdir -p "$ref/npm"
  (cd "$ref/npm" && npm install --no-audit --no-fund --ignore-scripts --silent \
    node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1)
fi
bins=$ref/npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ ! -d "$ref/llama.cpp/include" ]; then
  rm -rf "$ref/llama.cpp"
  git clone --quiet "$ref/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$ref/llama.cpp" 2>/dev/null
fi
mkdir -p "$ref/lib"
ln -sf "$bins/libllama.v0.4.0.so" "$ref/lib/libllama.so"
ln -sf "$bins/libggml.v0.4.0.so" "$ref/lib/libggml.so"
${CC:-gcc} -O1 -o "$ref/llama_logits" scripts/reference/llama_logits.c \
  -I"$ref/llama.cpp/include" -I"$ref/llama.cpp/ggml/include" -L"$ref/lib" -lllama -lggml -Wl,-rpath,"$bins"
echo "llama_ref: $ref (backends $bins)"
