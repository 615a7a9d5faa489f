"""PyTorch DDP twin of `gglua --nproc N scripts/bench/gpu_mlp.lua BATCH`: the
same MLP (1024-4096x4-10), Adam, TF32 on, each rank on BATCH/N rows.

    torchrun --nproc_per_node 2 scripts/bench/torch_ddp_mlp.py BATCH [STEPS]
"""
import os
import sys

import torch
import torch.distributed as dist

from torch_gpu_common import SIZES, adam_step, mlp, timed


def main():
    batch = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(mlp())
    torch.manual_seed(1 + rank)
    per = batch // world
    x = torch.randn(per, SIZES[0], device="cuda")
    y = torch.tensor([(i + 1) % 10 for i in range(per)], device="cuda")
    dt, loss = timed(adam_step(model, x, y), steps)
    if rank == 0:
        print(f"torch-ddp mlp batch={batch} gpus={world} mode=tf32 steps/s={steps / dt:.1f} ms/step={1000 * dt / steps:.2f} loss={loss:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
