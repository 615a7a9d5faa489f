"""PyTorch on the GPU for scripts/bench/gpu_residency.lua: the same MLP
(1024-4096x4-10, batch 64), Adam on the device, timed with CUDA sync.

    python3 scripts/bench/torch_gpu_residency.py [steps]
"""
import sys

import torch

from torch_gpu_common import SIZES, adam_step, mlp, timed


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    torch.manual_seed(0)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        model = mlp()
        x = torch.randn(64, SIZES[0], device="cuda")
        y = torch.tensor([i % 10 for i in range(64)], device="cuda")
        dt, _ = timed(adam_step(model, x, y), steps, warmup=5)
        print(f"torch {torch.__version__} tf32={tf32}: {steps / dt:.1f} steps/s, {1000 * dt / steps:.2f} ms/step")


if __name__ == "__main__":
    main()
