"""PyTorch twin of scripts/bench/gpu_mlp.lua: the same MLP (1024-4096x4-10),
Adam, at a batch, in one mode: f32 (TF32 off), tf32, or bf16 (autocast,
f32 master weights and Adam state, as researchers run mixed precision).

    python3 scripts/bench/torch_gpu_mlp.py BATCH MODE [STEPS]
"""
import sys
import time

import torch


def main():
    batch = int(sys.argv[1])
    mode = sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    sizes = [1024, 4096, 4096, 4096, 4096, 10]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = mode in ("tf32", "bf16")
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(batch, sizes[0], device="cuda")
    y = torch.tensor([(i + 1) % 10 for i in range(batch)], device="cuda")

    def step():
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"torch mlp batch={batch} mode={mode} steps/s={steps / dt:.1f} ms/step={1000 * dt / steps:.2f} loss={loss:.4f}")


if __name__ == "__main__":
    main()
