#!/usr/bin/env bash
# scripts/bench/gpt_compare.sh - gglua's transformer step against PyTorch eager's.
#
# Runs scripts/bench/gpt_bench.lua (gglua) and scripts/bench/torch_gpt.py
# (PyTorch) on one configuration and device, alternating the two for a number
# of rounds, then prints each side's best and median tokens/s and the ratio
# gglua/torch. It stops if the two models' parameter counts differ.
#
#   scripts/bench/gpt_compare.sh [cpu|cuda] [L H d T B steps] [rounds]
#   scripts/bench/gpt_compare.sh cpu 2 4 128 64 16 20 3        # the default
#   scripts/bench/gpt_compare.sh cuda 6 6 384 256 64 20 3      # nanoGPT's size
#
# Environment:
#   GGLUA   the gglua binary (default bin/gglua, built with `make build` if absent;
#           for cuda, bin/libggml-cuda.so beside it: docs/GPU.md)
#   PYTHON  the interpreter with torch (default python3, else /usr/bin/python3)
#   ATTN    PyTorch's attention: math (default, op by op), sdpa
#           (F.scaled_dot_product_attention, PyTorch >= 2.0), or best: PyTorch at
#           its best (sdpa, bf16 autocast, TF32, fused AdamW, torch.compile; set
#           PRECISION=bf16 for gglua's side too)
#   THREADS CPU threads for both sides (default: the machine's cores)
#   PRECISION f32 (default) or bf16: the forward under autocast on both sides
set -euo pipefail
cd "$(dirname "$0")/../.."

dev=${1:-cpu}
if [ $# -ge 7 ]; then cfg=("${@:2:6}"); rounds=${8:-3}; else cfg=(2 4 128 64 16 20); rounds=${2:-3}; fi
case $dev in cpu | cuda) ;; *) echo "gpt_compare: device must be cpu or cuda, not $dev" >&2; exit 2 ;; esac
attn=${ATTN:-math}
case $attn in math | sdpa | best) ;; *) echo "gpt_compare: ATTN must be math, sdpa or best, not $attn" >&2; exit 2 ;; esac
precision=${PRECISION:-f32}
case $precision in f32 | bf16) ;; *) echo "gpt_compare: PRECISION must be f32 or bf16, not $precision" >&2; exit 2 ;; esac
threads=${THREADS:-$(nproc)}

gglua=${GGLUA:-bin/gglua}
if [ ! -x "$gglua" ]; then make -s build; fi
python=${PYTHON:-python3}
if ! "$python" -c 'import torch' 2>/dev/null; then python=/usr/bin/python3; fi

# On the CPU the peer runs on OpenBLAS (Debian's torch calls the system BLAS),
# selected for its process only, and OpenMP threads that sleep when idle, as
# in compare.sh.
peer_env=()
if [ "$dev" = cpu ]; then
  peer_env=(OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" TORCH_THREADS="$threads")
  openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
  if [ -d "$openblas" ]; then peer_env+=(LD_LIBRARY_PATH="$openblas"); fi
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%F)"
echo "gglua: $("$gglua" --version); torch: $("$python" -c 'import torch; print(torch.__version__)') ($python)"
echo "config: device $dev, L H d T B steps = ${cfg[*]}, $rounds rounds, threads $threads, torch attention $attn, $precision"

field() { grep -o "$1=[0-9.]*" | cut -d= -f2; }
g_rates=() t_rates=()
for round in $(seq "$rounds"); do
  g=$("$gglua" --device "$dev" --threads "$threads" scripts/bench/gpt_bench.lua "${cfg[@]}" 5 "$precision")
  t=$(env "${peer_env[@]}" "$python" scripts/bench/torch_gpt.py "${cfg[@]}" "$dev" "$attn" 5 "$precision")
  echo "round $round  $g"
  echo "round $round  $t"
  gp=$(field params <<<"$g") tp=$(field params <<<"$t")
  if [ "$gp" != "$tp" ]; then echo "gpt_compare: parameter counts differ: gglua $gp, torch $tp" >&2; exit 1; fi
  g_rates+=("$(field tokens/s <<<"$g")") t_rates+=("$(field tokens/s <<<"$t")")
done

# Best and median of each side; the ratio of each.
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print v[NR], m }'; }
read -r g_best g_med <<<"$(stats "${g_rates[@]}")"
read -r t_best t_med <<<"$(stats "${t_rates[@]}")"
awk -v gb="$g_best" -v gm="$g_med" -v tb="$t_best" -v tm="$t_med" 'BEGIN {
  printf "\n| | gglua tokens/s | torch tokens/s | ratio gglua/torch |\n| --- | --- | --- | --- |\n"
  printf "| best | %.0f | %.0f | %.2f |\n| median | %.0f | %.0f | %.2f |\n", gb, tb, gb / tb, gm, tm, gm / tm
}'
