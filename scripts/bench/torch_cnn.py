"""The PyTorch peer of scripts/bench/cnn.lua: pytorch/examples' MNIST
network, forward + backward + Adadelta (lr 1) on a synthetic batch with a
fixed seed, timed after warm-up.

    python3 scripts/bench/torch_cnn.py [batch] [seconds]

Prints the same line as cnn.lua: batch and steps/s. Thread counts come from
OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (cnn_compare.sh runs both).
"""
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, 1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10), nn.LogSoftmax(dim=1))
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    x = torch.randn(batch, 1, 28, 28)
    target = torch.tensor([i % 10 for i in range(batch)])

    def step():
        opt.zero_grad()
        loss = F.nll_loss(model(x), target)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        step()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{batch} {n / dt:.2f} steps/s  peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
