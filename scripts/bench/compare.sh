#!/usr/bin/env bash
# scripts/bench/compare.sh - gglua against PyTorch on this CPU, side by side.
#
# Runs scripts/bench/mlp.lua (gglua) and scripts/bench/torch_mlp.py (PyTorch
# from Debian, with OpenBLAS) on the three reference MLPs, alternating the two
# in rounds, each at 1 and 2 threads, and prints each side's best steps/s and
# the ratio. Usage: scripts/bench/compare.sh [seconds-per-run] [rounds]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-3}
rounds=${2:-2}

# The peer: python3-torch (1.13.1) and OpenBLAS. Installing OpenBLAS makes it
# the system libblas.so.3; the previous alternative is restored afterwards and
# OpenBLAS is selected for the peer's processes only, via LD_LIBRARY_PATH.
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null || [ ! -d /usr/lib/x86_64-linux-gnu/openblas-pthread ]; then
  prev=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/ {print $2}')
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread >/dev/null
  if [ -n "$prev" ]; then update-alternatives --set libblas.so.3-x86_64-linux-gnu "$prev" >/dev/null || true; fi
fi
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread

make -s build
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
echo "gglua: $(bin/gglua --version)"

declare -A best_g best_t
for cfg in a b c; do best_g[$cfg]=0; best_t[$cfg]=0; done
better() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }

for round in $(seq "$rounds"); do
  for cfg in a b c; do
    for th in 1 2; do
      g=$(bin/gglua --threads "$th" scripts/bench/mlp.lua "$cfg" "$secs" | awk '{print $2}')
      t=$(LD_LIBRARY_PATH=$openblas OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$th OPENBLAS_NUM_THREADS=$th \
          /usr/bin/python3 scripts/bench/torch_mlp.py "$cfg" "$secs" | awk '{print $2}')
      echo "round $round  $cfg  threads $th   gglua $g   torch $t" >&2
      best_g[$cfg]=$(better "${best_g[$cfg]}" "$g")
      best_t[$cfg]=$(better "${best_t[$cfg]}" "$t")
    done
  done
done

printf '\n| config | gglua steps/s | PyTorch steps/s | ratio | bar |\n| --- | --- | --- | --- | --- |\n'
for cfg in a b c; do
  bar=1.5; [ "$cfg" = b ] && bar=1.0
  awk -v c="$cfg" -v g="${best_g[$cfg]}" -v t="${best_t[$cfg]}" -v bar="$bar" \
    'BEGIN { r = g / t; printf "| %s | %.1f | %.1f | %.2f | %s %s |\n", c, g, t, r, (r >= bar ? ">=" : "<"), bar }'
done
