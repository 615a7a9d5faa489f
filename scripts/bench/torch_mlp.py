"""The PyTorch peer of scripts/bench/mlp.lua: the same three MLPs, forward +
backward + Adam (lr 1e-3) on synthetic data with a fixed seed, timed after
warm-up.

    python3 scripts/bench/torch_mlp.py [config] [seconds]

Prints the same line as mlp.lua: config and steps/s. Thread counts come from
OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (see compare.sh).
"""
import os
import resource
import sys
import time

import torch

CONFIGS = {
    "a": ([784, 256, 10], 128, "ce"),
    "b": ([784, 1024, 1024, 10], 256, "ce"),
    "c": ([2, 16, 1], 32, "mse"),
}


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "a"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    sizes, batch, loss_kind = CONFIGS[name]
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, sizes[0])
    if loss_kind == "ce":
        target = torch.tensor([i % sizes[-1] for i in range(batch)])
        loss_fn = torch.nn.functional.cross_entropy
    else:
        target = torch.randn(batch, 1)
        loss_fn = torch.nn.functional.mse_loss

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), target)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(20):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name} {n / dt:.1f} steps/s  torch {torch.__version__} threads {torch.get_num_threads()}  peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
