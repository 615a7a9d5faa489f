"""PyTorch twin of scripts/bench/autocast_curve.lua: the MLP trained in f32
(TF32 off) and under bf16 autocast from one set of weights, on a random
teacher's labels; prints the largest relative gap between the loss curves
(bf16's noise, for gglua's gap to be read against).

    python3 scripts/bench/torch_autocast_curve.py [BATCH] [STEPS] [WIDTH] [cpu|cuda]
"""
import sys

import torch


def train(sizes, batch, steps, dev, autocast):
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    x = torch.randn(batch, sizes[0], device=dev)
    y = (x @ torch.randn(sizes[0], 10, device=dev)).argmax(1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    dev = sys.argv[4] if len(sys.argv) > 4 else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    sizes = [1024, width, width, width, width, 10]
    f32 = train(sizes, batch, steps, dev, False)
    ac = train(sizes, batch, steps, dev, True)
    gaps = [abs(a - f) / f for a, f in zip(ac, f32)]
    at = max(range(steps), key=lambda s: gaps[s])
    first = max(abs(a - f) for a, f in zip(ac, f32)) / f32[0]
    print(f"torch curve batch={batch} steps={steps} width={width}: largest gap {gaps[at]:.4f} of the loss (step {at + 1}), "
          f"{first:.5f} of the first loss; final f32 {f32[-1]:.5f} autocast {ac[-1]:.5f}")


if __name__ == "__main__":
    main()
