"""Reference values for core's composite reductions and sorting (var, std,
logsumexp, norm, prod, cumsum, sort, topk, gather) and the scatters, from
PyTorch:

    /usr/bin/python3 scripts/reference/stats.py core/testdata

writes torch_stats.json and torch_scatter_add.json (both run by TestStatsAsTorch;
the second holds scatter_add with an index smaller than src,
of which PyTorch adds only the elements within index's shape) there.

Each case: op, its arguments, the input, the output (and indices), and the
input's gradient of loss = sum(output * w) for the recorded w. NaN and the
infinities are the strings "nan", "inf", "-inf". Dims are 0-based here.
"""
import json
import math
import os
import sys

import torch

torch.manual_seed(7)
nan, inf = float("nan"), float("inf")


def num(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def flat(t):
    return [num(float(v)) for v in t.detach().flatten().tolist()]


def run(op, x, args, src=None):
    if op == "var":
        return torch.var(x, dim=args["dim"], correction=args["correction"], keepdim=args["keepdim"]), None
    if op == "std":
        return torch.std(x, dim=args["dim"], correction=args["correction"], keepdim=args["keepdim"]), None
    if op == "logsumexp":
        return torch.logsumexp(x, dim=args["dim"], keepdim=args["keepdim"]), None
    if op == "norm":
        return torch.linalg.vector_norm(x, ord=args["p"], dim=args["dim"], keepdim=args["keepdim"]), None
    if op == "prod":
        return torch.prod(x, dim=args["dim"], keepdim=args["keepdim"]), None
    if op == "cumsum":
        return torch.cumsum(x, dim=args["dim"]), None
    if op == "sort":
        r = torch.sort(x, dim=args["dim"], descending=args["descending"], stable=True)
        return r.values, r.indices
    if op == "topk":
        r = torch.topk(x, args["k"], dim=args["dim"], largest=args["largest"])
        return r.values, r.indices
    if op == "index_add":
        return x.index_add(args["dim"], torch.tensor(args["index"]), src), None
    if op == "scatter_add":
        idx = torch.tensor(args["index"]).reshape(args["index_shape"])
        # PyTorch 1.13's backward fails for an src larger than index (its
        # gradient, grad.gather(dim, index), has index's shape), so the
        # gradient comes through src sliced to index's shape, whose forward
        # must be PyTorch's own with the whole src.
        part = src[tuple(slice(0, n) for n in idx.shape)]
        y = x.scatter_add(args["dim"], idx, part)
        assert torch.equal(y, x.detach().scatter_add(args["dim"], idx, src.detach()))
        return y, None
    if op == "masked_select":
        mask = torch.tensor(args["mask"]).reshape(args["mask_shape"]).bool()
        return torch.masked_select(x, mask), None
    if op == "gather":
        idx = torch.tensor(args["index"]).reshape(args["index_shape"])
        return torch.gather(x, args["dim"], idx), None
    raise ValueError(op)


m = [[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]]
cases = [
    ("var", m, {"dim": 1, "correction": 1, "keepdim": False}),
    ("var", m, {"dim": 0, "correction": 0, "keepdim": True}),
    ("var", [[3.0], [5.0]], {"dim": 1, "correction": 1, "keepdim": False}),  # n = 1: nan
    ("std", m, {"dim": 1, "correction": 1, "keepdim": False}),
    ("std", [[1.0, 2.0, 3.0, 4.0]], {"dim": -1, "correction": 1, "keepdim": True}),
    ("logsumexp", m, {"dim": 1, "keepdim": False}),
    ("logsumexp", [[1000.0, 1000.0], [-1000.0, -1001.0]], {"dim": 1, "keepdim": False}),
    ("logsumexp", [[-inf, -inf], [-inf, 0.0]], {"dim": 1, "keepdim": True}),
    ("logsumexp", [[inf, 1.0], [nan, 1.0]], {"dim": 1, "keepdim": False}),
    ("norm", m, {"p": 2.0, "dim": 1, "keepdim": False}),
    ("norm", [[0.0, 0.0], [3.0, 4.0]], {"p": 2.0, "dim": 1, "keepdim": False}),
    ("norm", m, {"p": 1.0, "dim": 0, "keepdim": True}),
    ("norm", [[1.0, -3.0, 3.0], [2.0, 0.5, 1.0]], {"p": inf, "dim": 1, "keepdim": False}),
    ("norm", m, {"p": 3.0, "dim": 1, "keepdim": False}),
    ("norm", [[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]], {"p": 3.0, "dim": 1, "keepdim": False}),
    ("prod", m, {"dim": 1, "keepdim": False}),
    ("prod", [[2.0, 0.0, 3.0, 4.0, 5.0], [0.0, 0.0, 1.0, 2.0, 3.0]], {"dim": 1, "keepdim": True}),
    ("prod", [[1.5, -2.0], [0.5, 4.0], [3.0, 1.0]], {"dim": 0, "keepdim": False}),
    ("cumsum", m, {"dim": 1}),
    ("cumsum", [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]], {"dim": 0}),
    ("cumsum", [[1.0, inf, 2.0, -inf, 1.0]], {"dim": 1}),
    ("sort", [[3.0, 1.0, 2.0, 1.0], [nan, 0.0, -inf, nan]], {"dim": 1, "descending": False}),
    ("sort", [[3.0, 1.0, 2.0, 1.0], [nan, 0.0, -inf, nan]], {"dim": 1, "descending": True}),
    ("sort", m, {"dim": 0, "descending": False}),
    ("topk", [[3.0, 1.0, 2.0, 5.0], [0.0, 7.0, -1.0, 4.0]], {"k": 2, "dim": 1, "largest": True}),
    ("topk", [[3.0, 1.0, 2.0, 5.0], [0.0, 7.0, -1.0, 4.0]], {"k": 3, "dim": 1, "largest": False}),
    ("gather", m, {"dim": 1, "index": [2, 0, 0, 1, 1, 1], "index_shape": [2, 3]}),
    ("gather", m, {"dim": 0, "index": [1, 0, 1], "index_shape": [1, 3]}),
]
cases += [
    ("index_add", m, {"dim": 1, "index": [2, 0, 2], "src": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}),
    ("index_add", m, {"dim": 0, "index": [1], "src": [[10.0, 20.0, 30.0]]}),
    ("scatter_add", m, {"dim": 1, "index": [0, 0, 2, 1], "index_shape": [2, 2], "src": [[1.0, 2.0], [3.0, 4.0]]}),
    ("scatter_add", m, {"dim": 0, "index": [1, 0, 1], "index_shape": [1, 3], "src": [[5.0, 6.0, 7.0]]}),
    ("masked_select", m, {"mask": [1, 0, 1, 0, 0, 1], "mask_shape": [2, 3]}),
    ("masked_select", m, {"mask": [0, 1, 1], "mask_shape": [3]}),
]
# scatter_add with an index smaller than src in some dims (PyTorch 1.13:
# index.size(d) <= src.size(d) for every d, <= self.size(d) for d != dim;
# index.size(dim) may exceed self.size(dim)). Only src[:index's shape] adds.
scatter_cases = [
    ("scatter_add", m, {"dim": 1, "index": [0, 0, 2, 1], "index_shape": [2, 2],
                        "src": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}),
    ("scatter_add", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]],
     {"dim": 0, "index": [2, 0], "index_shape": [1, 2],
      "src": [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]}),
    ("scatter_add", [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]],
     {"dim": 1, "index": [3, 3], "index_shape": [1, 2],
      "src": [[1.5, -2.0, 4.0], [8.0, 16.0, 32.0], [64.0, 128.0, 256.0]]}),
    ("scatter_add", m, {"dim": 0, "index": [1, 0, 1, 1, 0, 0, 1, 1], "index_shape": [4, 2],
                        "src": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [10.0, 11.0, 12.0],
                                [13.0, 14.0, 15.0]]}),
    ("scatter_add", [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]],
     {"dim": 1, "index": [2, 0, 1, 1], "index_shape": [2, 2, 1],
      "src": [[[0.5, 1.0], [1.5, 2.0], [2.5, 3.0]], [[3.5, 4.0], [4.5, 5.0], [5.5, 6.0]]]}),
    ("scatter_add", m, {"dim": -1, "index": [2, 1], "index_shape": [2, 1],
                        "src": [[1.0, 2.0], [3.0, 4.0]]}),
]


def reference(cases):
    out = []
    for op, xv, args in cases:
        out.append(one(op, xv, args))
    return out


def one(op, xv, args):
    x = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    src = None
    if "src" in args:
        src = torch.tensor(args["src"], dtype=torch.float64, requires_grad=True)
        args = dict(args, src_shape=list(src.shape), src=src.detach().flatten().tolist())
    y, idx = run(op, x, args, src)
    w = torch.randn(y.shape, dtype=torch.float64).round(decimals=2)
    (y * w).sum().backward()
    g = x.grad if x.grad is not None else torch.zeros_like(x)
    return {
        "op": op, "args": {k: (num(v) if isinstance(v, float) else v) for k, v in args.items()},
        "x": {"shape": list(x.shape), "values": flat(x)},
        "out": {"shape": list(y.shape) or [1], "values": flat(y)},
        "indices": None if idx is None else idx.flatten().tolist(),
        "w": {"shape": list(y.shape) or [1], "values": flat(w)},
        "grad": {"shape": list(x.shape), "values": flat(g)},
        "grad_src": None if src is None else {"shape": list(src.shape), "values": flat(src.grad)},
    }


# One random stream, stats first: adding scatter cases leaves torch_stats.json as it was.
outdir = sys.argv[1]
for name, cs in (("torch_stats.json", cases), ("torch_scatter_add.json", scatter_cases)):
    with open(os.path.join(outdir, name), "w") as f:
        json.dump(reference(cs), f, indent=1)
