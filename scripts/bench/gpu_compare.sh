#!/usr/bin/env bash
# scripts/bench/gpu_compare.sh - gglua's MLP step on a GPU against PyTorch's,
# side by side: the large-batch and bf16 comparisons of issue [13].
#
# Runs scripts/bench/gpu_mlp.lua (gglua) and scripts/bench/torch_gpu_mlp.py
# (PyTorch) on the MLP of gpu_residency.lua (1024-4096x4-10, Adam) at each
# batch, in two pairings: gglua f32 against PyTorch with TF32 (the f32 bar),
# and gglua's autocast against PyTorch's bf16 autocast. The two sides
# alternate for a number of rounds; each side's best steps/s and the ratio
# gglua/torch are printed.
#
#   scripts/bench/gpu_compare.sh [batches] [rounds] [steps]
#   scripts/bench/gpu_compare.sh "64 1024 8192" 2 30      # the default
#
# Environment:
#   GGLUA   the gglua binary (default bin/gglua, with bin/libggml-cuda.so
#           beside it: docs/GPU.md)
#   PYTHON  the interpreter with torch and CUDA (default python3)
set -euo pipefail
cd "$(dirname "$0")/../.."

batches=${1:-64 1024 8192}
rounds=${2:-2}
steps=${3:-30}
gglua=${GGLUA:-bin/gglua}
python=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0

echo "gglua: $("$gglua" --version); torch: $("$python" -c 'import torch; print(torch.__version__)')"
echo "config: batches $batches, $rounds rounds of $steps steps"

rate() { grep -o 'steps/s=[0-9.]*' | cut -d= -f2 | tail -1; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }

rows=()
for batch in $batches; do
  for pair in "f32 tf32" "autocast bf16"; do
    read -r gmode tmode <<<"$pair"
    g_rates=() t_rates=()
    for round in $(seq "$rounds"); do
      g=$("$gglua" --device cuda scripts/bench/gpu_mlp.lua "$batch" "$gmode" "$steps" 2>/dev/null | grep '^gglua mlp' || true)
      t=$("$python" scripts/bench/torch_gpu_mlp.py "$batch" "$tmode" "$steps" 2>/dev/null | grep '^torch mlp' || true)
      echo "round $round  $g" >&2
      echo "round $round  $t" >&2
      gr=$(rate <<<"$g") tr=$(rate <<<"$t")
      if [ -z "$gr" ] || [ -z "$tr" ]; then echo "gpu_compare: no steps/s from a run at batch $batch ($gmode / $tmode)" >&2; exit 1; fi
      g_rates+=("$gr") t_rates+=("$tr")
    done
    rows+=("$batch $gmode $(best "${g_rates[@]}") $tmode $(best "${t_rates[@]}")")
  done
done

printf '\n| batch | gglua | steps/s | PyTorch | steps/s | ratio |\n| --- | --- | --- | --- | --- | --- |\n'
for row in "${rows[@]}"; do
  awk -v r="$row" 'BEGIN { split(r, f, " "); printf "| %s | %s | %.1f | %s | %.1f | %.2f |\n", f[1], f[2], f[3], f[4], f[5], f[3] / f[5] }'
done
