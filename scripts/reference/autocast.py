#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's autocast tests.

Run by hand with PyTorch on a machine with CUDA (the GPU machines' torch
2.11 wrote the file):

    python3 scripts/reference/autocast.py

It writes core/testdata/torch_autocast.json, in the format of
torch_numerics.json: each case is a product computed inside
torch.autocast("cuda", dtype=torch.bfloat16) from float32 inputs, its
(bfloat16) output widened to float32, a fixed cotangent and the float32
gradients of sum(output * cotangent). core/autocast_test.go reads it. CI
does not run PyTorch.

CUDA, not the CPU: torch 1.13's CPU bf16 GEMM (this Debian build, AVX2)
sums in bf16 and lands up to 4% from the product of the rounded operands;
cuBLAS sums in f32, as researchers' autocast runs do.
"""
import torch
import torch.nn.functional as F

from torchref import make_case, write_cases

assert torch.cuda.is_available(), "autocast.py needs CUDA (see its docstring)"
torch.manual_seed(13)


def autocast(f):
    """f run on the GPU under bf16 autocast; its output must come out bf16.
    The inputs and the output are CPU tensors (the copies are
    differentiable), so make_case's cotangent and gradients are too."""
    def run(*ts):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = f(*[t.cuda() for t in ts])
        assert out.dtype == torch.bfloat16, out.dtype
        return out.cpu()
    return run


cases = []
for name, op, f, shapes in [
    ("linear", "linear", F.linear, [[5, 16], [7, 16]]),
    ("linear of a batch", "linear", F.linear, [[2, 3, 16], [8, 16]]),
    ("matmul", "matmul", torch.matmul, [[6, 12], [12, 5]]),
    ("matmul, 4-d batches", "matmul", torch.matmul, [[2, 3, 4, 8], [2, 3, 8, 4]]),
    ("bmm", "bmm", torch.bmm, [[3, 4, 16], [3, 16, 5]]),
    ("conv2d", "conv2d", F.conv2d, [[2, 3, 6, 6], [4, 3, 3, 3]]),
]:
    inputs = [torch.randn(*s) for s in shapes]
    cases.append(make_case(name, op, autocast(f), inputs))

print(write_cases("torch_autocast.json", "scripts/reference/autocast.py", cases))
