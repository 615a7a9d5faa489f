"""The PyTorch twin of scripts/bench/gpt_bench.lua: the same character GPT
(scripts/examples/gpt.lua's) and the same training step, in eager mode.

    python3 scripts/bench/torch_gpt.py L H d T B steps [cpu|cuda] [math|sdpa|best] [warmup] [f32|bf16]

Defaults: 2 4 128 64 16 20 cpu math 5 f32; bf16 runs the forward under
torch.autocast(dtype=torch.bfloat16) (gpt_bench.lua's bf16: gglua's autocast). Prints the line gpt_bench.lua prints,
with "torch" first:

    torch gpt L=.. H=.. d=.. T=.. B=.. tokens/s=... ms/step=... loss=... params=...

Attention: "math" (the default) computes it as gglua does, op by op:
q k^T * scale, the causal mask filled with -inf, softmax, times v (gglua's
nn.scaled_dot_product_attention is composed of those ops, not fused).
"sdpa" uses torch.nn.functional.scaled_dot_product_attention (PyTorch >= 2.0;
fused flash/memory-efficient kernels on a GPU), which is what a PyTorch user
would write today: run both to see what fusing buys. "best" is PyTorch at
its best: sdpa, bf16 autocast, TF32 matmuls, AdamW(fused=True) on a GPU and
torch.compile(model) (compiled during the warm-up steps, which are not
timed).

Everything else matches gpt_bench.lua: untied head without bias, GELU (exact),
LayerNorm eps 1e-5, normal(0, 0.02) on every matrix (embeddings included),
PyTorch's default Linear biases; AdamW lr 3e-3 betas (0.9, 0.95), weight decay
0.1 on the matrices that are not embeddings and 0 on the rest; warmup-cosine
(gglua's formula, as a LambdaLR) over warmup + steps; clipping at 1.0; the loss
read once a step. The data: 8 batches of random tokens of 65 symbols made
before timing (on the host; each step copies its batch to the device, as
gglua uploads it). On the CPU the thread count is the machine's cores unless
TORCH_THREADS says otherwise.
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, NBATCH = 65, 8


class SelfAttention(nn.Module):
    def __init__(self, d, heads, block, attn):
        super().__init__()
        self.heads, self.attn = heads, attn
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        # gglua builds the same 0/1 lower triangle (once a forward, on the host).
        self.register_buffer("causal", torch.tril(torch.ones(block, block, dtype=torch.bool)))

    def forward(self, x):
        b, t, e = x.shape
        h = self.heads
        q, k, v = self.qkv(x).chunk(3, dim=2)

        def split(z):
            return z.reshape(b, t, h, e // h).transpose(1, 2)

        q, k, v = split(q), split(k), split(v)
        if self.attn == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(e // h))
            s = s.masked_fill(~self.causal[:t, :t], float("-inf"))
            y = s.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, e))


class Block(nn.Module):
    def __init__(self, d, heads, block, attn):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads, block, attn)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, heads, d, block, attn):
        super().__init__()
        self.tok_emb = nn.Embedding(V, d)
        self.pos_emb = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads, block, attn) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, V, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def warmup_cosine(warmup, total, lr0, eta_min):
    """gglua's optim.lr_scheduler.warmup_cosine as a LambdaLR factor of lr0."""

    def factor(t):
        if t < warmup:
            return (t + 1) / (warmup + 1)
        c = (1 + math.cos(math.pi * min(t - warmup, total - warmup) / (total - warmup))) / 2
        return (eta_min + (lr0 - eta_min) * c) / lr0

    return factor


def main():
    argv = sys.argv[1:]
    ints = [int(a) for a in argv[:6]] + [2, 4, 128, 64, 16, 20][len(argv[:6]):]
    L, H, E, T, B, steps = ints
    dev = argv[6] if len(argv) > 6 else "cpu"
    attn = argv[7] if len(argv) > 7 else "math"
    warmup = int(argv[8]) if len(argv) > 8 else 5
    precision = argv[9] if len(argv) > 9 else "f32"  # bf16: the forward under autocast
    best = attn == "best"  # what a PyTorch user turns on today, on a GPU
    if best:
        attn, precision = "sdpa", "bf16"
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if E % H != 0 or attn not in ("math", "sdpa") or dev not in ("cpu", "cuda") or precision not in ("f32", "bf16"):
        sys.exit(f"torch_gpt: bad arguments {argv} (d a multiple of H; device cpu|cuda; attention math|sdpa)")
    if attn == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(f"torch_gpt: attention sdpa needs PyTorch >= 2.0, this is {torch.__version__}")
    if dev == "cpu":
        torch.set_num_threads(int(os.environ.get("TORCH_THREADS", os.cpu_count())))

    # Under torchrun (the twin of `gglua --nproc N gpt_bench.lua`): DDP, each
    # rank on B/N of the batch, rank 0 printing the global tokens/s.
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    if B % world != 0:
        sys.exit(f"torch_gpt: the batch {B} does not split over {world} processes")
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("nccl")
        rank = dist.get_rank()
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(1337)
    model = GPT(L, H, E, T, attn).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    global_b, B = B, B // world
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
        torch.manual_seed(1337 + rank)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "emb" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "emb" not in n)]
    lr0 = 3e-3
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr0, betas=(0.9, 0.95), **({"fused": True} if best and dev == "cuda" else {}))
    if best:
        model = torch.compile(model)
    total = warmup + steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total // 10, total, lr0, 3e-4))

    xs = [torch.randint(0, V, (B, T)) for _ in range(NBATCH)]
    ys = [torch.randint(0, V, (B * T,)) for _ in range(NBATCH)]
    n = 0

    def step():
        nonlocal n
        x, y = xs[n % NBATCH].to(dev), ys[n % NBATCH].to(dev)
        n += 1
        opt.zero_grad()
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(model(x).reshape(B * T, V), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss.item()

    for _ in range(warmup):
        step()
    if dev == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    if dev == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if rank != 0:
        return
    print(f"torch {torch.__version__} {dev}, {torch.get_num_threads()} threads, attention {attn}, {precision}, "
          f"{'compiled, TF32, fused AdamW, ' if best else ''}"
          f"{warmup} warm-up steps, {world} processes", file=sys.stderr)
    print(f"torch gpt L={L} H={H} d={E} T={T} B={global_b} tokens/s={steps * global_b * T / dt:.0f} "
          f"ms/step={1000 * dt / steps:.2f} loss={loss:.4f} params={nparams}"
          + (f" peak={torch.cuda.max_memory_allocated() >> 20}MiB held={torch.cuda.max_memory_reserved() >> 20}MiB"
             if dev == "cuda" else ""))


if __name__ == "__main__":
    main()
