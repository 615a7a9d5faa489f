"""PyTorch twin of scripts/bench/gpu_mlp.lua: the same MLP (1024-4096x4-10),
Adam, at a batch, in one mode: f32 (TF32 off), tf32, or bf16 (autocast,
f32 master weights and Adam state, as researchers run mixed precision).

    python3 scripts/bench/torch_gpu_mlp.py BATCH MODE [STEPS]
"""
import sys

import torch

from torch_gpu_common import SIZES, adam_step, mlp, timed


def main():
    batch = int(sys.argv[1])
    mode = sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = mode in ("tf32", "bf16")
    model = mlp()
    x = torch.randn(batch, SIZES[0], device="cuda")
    y = torch.tensor([(i + 1) % 10 for i in range(batch)], device="cuda")
    dt, loss = timed(adam_step(model, x, y, autocast=mode == "bf16"), steps)
    print(f"torch mlp batch={batch} mode={mode} steps/s={steps / dt:.1f} ms/step={1000 * dt / steps:.2f} loss={loss:.4f}")


if __name__ == "__main__":
    main()
