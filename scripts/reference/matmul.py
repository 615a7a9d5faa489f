"""Reference values of torch.matmul and torch.bmm for core's tests.

Run with PyTorch (1.13 here):
    /usr/bin/python3 scripts/reference/matmul.py > core/testdata/torch_matmul.json

Each case: the operands' shapes and values, the product, and the gradients
of loss = sum(product * w) for the recorded w.
"""
import json

import torch

torch.manual_seed(20261130)
cases = []
for name, sa, sb, op in [
    ("dot", [3], [3], "matmul"),
    ("vector @ matrix", [3], [3, 2], "matmul"),
    ("matrix @ vector", [2, 3], [3], "matmul"),
    ("vector @ batch", [3], [2, 3, 4], "matmul"),
    ("batch @ vector", [2, 4, 3], [3], "matmul"),
    ("matrix @ matrix", [2, 3], [3, 4], "matmul"),
    ("batch @ matrix", [2, 2, 3], [3, 4], "matmul"),
    ("matrix @ batch", [2, 3], [2, 3, 4], "matmul"),
    ("4-d batches", [2, 3, 2, 4], [2, 3, 4, 2], "matmul"),
    ("4-d broadcast both ways", [2, 1, 2, 3], [1, 3, 3, 2], "matmul"),
    ("4-d @ 2-d", [2, 2, 2, 3], [3, 2], "matmul"),
    ("3-d @ 4-d", [3, 2, 4], [2, 1, 4, 3], "matmul"),
    ("bmm", [3, 2, 4], [3, 4, 2], "bmm"),
]:
    a = torch.randn(*sa, dtype=torch.float64, requires_grad=True)
    b = torch.randn(*sb, dtype=torch.float64, requires_grad=True)
    y = torch.matmul(a, b) if op == "matmul" else torch.bmm(a, b)
    w = torch.randn(y.shape, dtype=torch.float64)
    (y * w).sum().backward()
    shape = list(y.shape) or [1]  # gglua has no 0-d tensors: a dot is [1]
    cases.append({
        "name": name, "op": op,
        "a_shape": sa, "a": a.detach().flatten().tolist(),
        "b_shape": sb, "b": b.detach().flatten().tolist(),
        "out_shape": shape, "out": y.detach().flatten().tolist(),
        "w": w.flatten().tolist(),
        "grad_a": a.grad.flatten().tolist(), "grad_b": b.grad.flatten().tolist(),
    })
json.dump(cases, open(1, "w"), indent=1)
