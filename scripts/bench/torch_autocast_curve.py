"""PyTorch twin of scripts/bench/autocast_curve.lua: the MLP trained in f32,
under bf16 autocast, and in f32 from the same weights rounded once to bf16,
for each of SEEDS seeds, on a random teacher's labels; prints the largest
gap between each curve and f32's as a fraction of the first loss (PyTorch's
own autocast gap: bf16's noise, for gglua's to be read against). TF32 is
allowed, as gglua's f32 products on a GPU are (ggml-cuda's cuBLAS mode).

    python3 scripts/bench/torch_autocast_curve.py [BATCH] [STEPS] [WIDTH] [SEEDS] [cpu|cuda]
"""
import statistics
import sys

import torch


def train(sizes, batch, steps, dev, mode, seed):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    if mode == "rounded":
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
    x = torch.randn(batch, sizes[0], device=dev)
    y = (x @ torch.randn(sizes[0], 10, device=dev)).argmax(1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=mode == "autocast"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def gap(a, f32):
    """The largest |a - f32| as a fraction of the first loss, and its step."""
    d = [abs(x - f) / f32[0] for x, f in zip(a, f32)]
    at = max(range(len(d)), key=lambda s: d[s])
    return d[at], at + 1


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    seeds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    dev = sys.argv[5] if len(sys.argv) > 5 else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    sizes = [1024, width, width, width, width, 10]
    ac_gaps, noise_gaps = [], []
    for seed in range(seeds):
        f32 = train(sizes, batch, steps, dev, "f32", seed)
        ac = train(sizes, batch, steps, dev, "autocast", seed)
        rounded = train(sizes, batch, steps, dev, "rounded", seed)
        g, at = gap(ac, f32)
        n, nat = gap(rounded, f32)
        ac_gaps.append(g)
        noise_gaps.append(n)
        print(f"seed {seed}: autocast gap {g:.5f} (step {at}: {ac[at - 1]:.5f} against f32's {f32[at - 1]:.5f}), "
              f"noise {n:.5f} (step {nat}); final f32 {f32[-1]:.5f} autocast {ac[-1]:.5f}")
    print(f"torch curve batch={batch} steps={steps} width={width} seeds={seeds}: autocast gap median "
          f"{statistics.median_low(ac_gaps):.5f} max {max(ac_gaps):.5f}; noise median "
          f"{statistics.median_low(noise_gaps):.5f} max {max(noise_gaps):.5f} (of the first loss)")


if __name__ == "__main__":
    main()
