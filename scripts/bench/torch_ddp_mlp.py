"""PyTorch DDP twin of `gglua --nproc N scripts/bench/gpu_mlp.lua BATCH`: the
same MLP (1024-4096x4-10), Adam, TF32 on, each rank on BATCH/N rows.

    torchrun --nproc_per_node 2 scripts/bench/torch_ddp_mlp.py BATCH [STEPS]
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    batch = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.backends.cuda.matmul.allow_tf32 = True
    sizes = [1024, 4096, 4096, 4096, 4096, 10]
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).cuda())
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    torch.manual_seed(1 + rank)
    per = batch // world
    x = torch.randn(per, sizes[0], device="cuda")
    y = torch.tensor([(i + 1) % 10 for i in range(per)], device="cuda")

    def step():
        opt.zero_grad()
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
    if rank == 0:
        print(f"torch-ddp mlp batch={batch} gpus={world} mode=tf32 steps/s={steps / dt:.1f} ms/step={1000 * dt / steps:.2f} loss={loss:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
