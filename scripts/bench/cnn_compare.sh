#!/usr/bin/env bash
# scripts/bench/cnn_compare.sh - gglua against PyTorch on this CPU, side by
# side: scripts/bench/cnn.lua and scripts/bench/torch_cnn.py (pytorch/examples'
# MNIST network, Adadelta) alternating in rounds at one thread, PyTorch on
# OpenBLAS as compare.sh sets it up. Prints every run and each side's best.
# Usage: scripts/bench/cnn_compare.sh [batch] [seconds-per-run] [rounds]
set -euo pipefail
cd "$(dirname "$0")/../.."
batch=${1:-64}
secs=${2:-5}
rounds=${3:-3}
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
[ -d "$openblas" ] || { echo "install python3-torch and libopenblas0-pthread first (see compare.sh)" >&2; exit 1; }

make -s build
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
best_g=0 best_t=0
better() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }
for round in $(seq "$rounds"); do
  g=$(bin/gglua --threads 1 scripts/bench/cnn.lua "$batch" "$secs" | awk '{print $2}')
  t=$(LD_LIBRARY_PATH=$openblas OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
      /usr/bin/python3 scripts/bench/torch_cnn.py "$batch" "$secs" | awk '{print $2}')
  echo "round $round  batch $batch  gglua $g  torch $t steps/s"
  best_g=$(better "$best_g" "$g")
  best_t=$(better "$best_t" "$t")
done
echo "best: gglua $best_g  torch $best_t  ratio $(awk -v a="$best_g" -v b="$best_t" 'BEGIN { printf "%.2f", a / b }')"
