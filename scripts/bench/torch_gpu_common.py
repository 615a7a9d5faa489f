"""What the PyTorch GPU twins of scripts/bench share: the benchmark MLP and
a timed loop of training steps (CUDA synchronised around it)."""
import time

import torch

SIZES = [1024, 4096, 4096, 4096, 4096, 10]


def mlp(sizes=SIZES):
    """Linear layers of sizes with ReLU between them, on the GPU."""
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).cuda()


def adam_step(model, x, y, autocast=False):
    """One training step function: cross-entropy, backward, Adam (lr 1e-4);
    bf16 autocast around the forward when asked."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def timed(step, steps, warmup=3):
    """Seconds for steps calls of step after warmup ones, and the last loss."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    loss = None
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, loss
