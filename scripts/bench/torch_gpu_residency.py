"""PyTorch on the GPU for scripts/bench/gpu_residency.lua: the same MLP
(1024-4096x4-10, batch 64), Adam on the device, timed with CUDA sync.

    python3 scripts/bench/torch_gpu_residency.py [steps]
"""
import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    sizes = [1024, 4096, 4096, 4096, 4096, 10]
    torch.manual_seed(0)
    for tf32 in (False, True):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers).cuda()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        x = torch.randn(64, sizes[0], device="cuda")
        y = torch.tensor([i % 10 for i in range(64)], device="cuda")

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        for _ in range(5):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"torch {torch.__version__} tf32={tf32}: {steps / dt:.1f} steps/s, {1000 * dt / steps:.2f} ms/step")


if __name__ == "__main__":
    main()
