#!/usr/bin/python3
"""Reference values for gglua's max/min/argmax from PyTorch (1.13 here).

Run by hand where PyTorch is installed (Debian: apt-get install python3-torch,
then /usr/bin/python3 scripts/reference/reductions.py); it writes
core/testdata/torch_reductions.json, which core's tests compare against.
Dims in the file are 0-based (as core's Go API). For each case the loss is
sum(values * cot), whose gradient wrt the input is recorded.
"""
import json, math, os
import torch

nan, inf = float("nan"), float("inf")


def enc(v):
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if v == inf:
        return "inf"
    if v == -inf:
        return "-inf"
    return v


def flat(t):
    return [enc(float(v)) for v in t.detach().reshape(-1).tolist()]


INPUTS = {
    "cube": ([2, 2, 2], [1, 2, 3, 4, 5, 6, 7, 8]),
    "ties": ([2, 4], [3, 1, 3, 2, 5, 5, 5, 0]),
    "nan": ([2, 4], [1, nan, 7, nan, 2, 9, 4, 9]),
    "inf": ([2, 3], [-inf, -inf, -inf, inf, 1, inf]),
    "mixed3d": ([2, 3, 2], [4, 1, 4, 7, 0, 7, 2, nan, 2, 2, -1, 3]),
    "col_ties": ([3, 2], [1, 8, 1, 8, 0, 8]),
}

cases = []
for name, (shape, data) in INPUTS.items():
    n = len(shape)
    for op in ("max", "min"):
        for dim in range(n):
            for keepdim in (False, True):
                x = torch.tensor(data, dtype=torch.float32).reshape(shape).requires_grad_()
                vals, idx = getattr(torch, op)(x, dim, keepdim)
                g = torch.Generator().manual_seed(len(cases))
                cot = torch.rand(vals.shape, generator=g) + 0.5
                (vals * cot).sum().backward()
                cases.append(dict(name=f"{name} {op} dim {dim} keepdim {keepdim}", op=op, dim=dim, keepdim=keepdim,
                                  shape=shape, x=[enc(float(v)) for v in data], cot=flat(cot),
                                  out_shape=list(vals.shape), values=flat(vals), indices=flat(idx.float()),
                                  grad=flat(x.grad)))
        x = torch.tensor(data, dtype=torch.float32).reshape(shape).requires_grad_()
        v = getattr(torch, op)(x)
        (v * 1.5).sum().backward()
        cases.append(dict(name=f"{name} {op} all", op=op, dim=None, keepdim=False, shape=shape,
                          x=[enc(float(v)) for v in data], cot=[1.5], out_shape=[1], values=flat(v.reshape(1)),
                          indices=None, grad=flat(x.grad)))
    for dim in range(n):
        x = torch.tensor(data, dtype=torch.float32).reshape(shape)
        cases.append(dict(name=f"{name} argmax dim {dim}", op="argmax", dim=dim, keepdim=False, shape=shape,
                          x=[enc(float(v)) for v in data], cot=None, out_shape=list(torch.argmax(x, dim).shape),
                          values=None, indices=flat(torch.argmax(x, dim).float()), grad=None))

out = os.path.join(os.path.dirname(__file__), "..", "..", "core", "testdata", "torch_reductions.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, indent=0)
print(len(cases), "cases ->", os.path.normpath(out))
