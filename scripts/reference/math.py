#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's elementwise math and mask ops (issue 12).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/math.py

It writes core/testdata/torch_math.json in the format of torch_numerics.json
(see scripts/reference/numerics.py): each case holds an op, its arguments,
its float32 inputs, the output, a fixed cotangent and the gradients of
sum(output * cotangent) with respect to every input that needs one (null
otherwise). Non-finite numbers are the strings "nan", "inf" and "-inf".
Bool results (comparisons, masks) are written as 0/1, as gglua returns
them; "requires_grad" lists which inputs required grad in the forward and
"output_requires_grad" whether the output did (comparisons: never). Dims
are 0-based, as PyTorch takes them. The Go tests (core/ops_compare_test.go)
read the file and compare; CI does not run PyTorch.
"""
import json
import math
import os

import torch

nan, inf = float("nan"), float("inf")
torch.manual_seed(12)


from torchref import make_case  # noqa: E402 (shared helpers)


cases = []


def case(name, op, f, inputs, grads=None, args=None):
    """inputs: lists or tensors (float32); grads: which inputs require grad
    (default all). A bool output is made float (0/1)."""
    cases.append(make_case(name, op, f, inputs, grads, args, flags=True))


specials = [nan, inf, -inf, 0, -0.0]

# ---- unary math ----
ux = [0.5, -1.5, 2, 3.25, -0.7, 10, -100, 1e-3] + specials
case("sin", "sin", torch.sin, [ux])
case("cos", "cos", torch.cos, [ux])
case("tan", "tan", torch.tan, [[0.5, -1.5, 1.2, 3.25, -0.7, 1e-3, 0] + specials])
case("square", "square", torch.square, [ux])
case("reciprocal", "reciprocal", torch.reciprocal, [ux])
case("rsqrt", "rsqrt", torch.rsqrt, [[0.25, 1, 4, 1e-6, 1e6, -1] + specials])
case("log1p", "log1p", torch.log1p, [[1e-8, -1e-8, 1e-4, 0.5, -0.5, 3, 1e30, -1, -2, 6e-8, -6e-8] + specials])
case("log1p random", "log1p", torch.log1p, [torch.rand(3, 4) * 4 - 0.99])
ex = [0.5, -0.5, 0.49999997, 0.50000006, 1e-4, -1e-4, 1e-30, 0.1, -0.3, 1, -2, 3.9, 5.9, 6.5, -7, 20] + specials
case("erf", "erf", torch.erf, [ex])
case("erf random", "erf", torch.erf, [torch.randn(3, 5) * 2])
rx = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, 0.49999997, 2.7, -2.7, 1e7 + 1, 8388609, 4194304.5,
      -4194304.5, 0.4, 1e20] + specials
for op in ["floor", "ceil", "round", "trunc", "sign"]:
    case(op, op, getattr(torch, op), [rx])
case("round random", "round", torch.round, [torch.randn(4, 5) * 10])

# ---- comparisons (no gradient) ----
ca = [1, 2, 3, nan, inf, -inf, inf, 0, -0.0, 1e-45, 3e38, -3e38, nan, 5]
cb = [1, 3, 2, 1, inf, -inf, -inf, -0.0, 0, 0, -3e38, 3e38, nan, 2]
fmax = 3.4028234663852886e38  # the largest float32: inf must not tie with it
fa = [inf, fmax, -inf, -fmax, inf, fmax, -fmax]
fb = [fmax, inf, -fmax, -inf, inf, -fmax, fmax]
cmps = ["gt", "lt", "ge", "le", "eq", "ne"]
for op in cmps:
    case(op + " tensors", op, lambda a, b, op=op: getattr(a, op)(b), [ca, cb])
    case(op + " number", op, lambda a, op=op: getattr(a, op)(2), [ca], args={"other": 2})
    case(op + " nan number", op, lambda a, op=op: getattr(a, op)(nan), [[1, nan, inf]], args={"other": "nan"})
    case(op + " inf and max float", op, lambda a, b, op=op: getattr(a, op)(b), [fa, fb])
    case(op + " broadcast", op, lambda a, b, op=op: getattr(a, op)(b),
         [torch.randint(0, 3, (3, 1)).float(), torch.randint(0, 3, (1, 4)).float()])

# ---- masks ----
mx = [0, 1, -2, nan, inf, -inf, 0.5, -0.0, 3e38]
case("isnan", "isnan", torch.isnan, [mx])
case("isinf", "isinf", torch.isinf, [mx])
case("isfinite", "isfinite", torch.isfinite, [mx])
case("logical_not", "logical_not", torch.logical_not, [mx])
la = [0, 0, 1, 1, nan, 2, -0.0, inf]
lb = [0, 1, 0, 1, 0, nan, 3, -0.0]
for op in ["logical_and", "logical_or", "logical_xor"]:
    case(op, op, getattr(torch, op), [la, lb])
    case(op + " broadcast", op, getattr(torch, op), [[[0], [1], [nan]], [[0, 2]]])
for op in ["any", "all"]:
    case(op + " some", op, getattr(torch, op), [[[0, 1, 0], [0, 0, 0]]])
    case(op + " none", op, getattr(torch, op), [[[0, 0, 0]]])
    case(op + " every", op, getattr(torch, op), [[[1, nan, -2]]])
    case(op + " dim 0", op, lambda x, op=op: getattr(torch, op)(x, 0), [[[0, 1, 1], [0, 0, 1]]], args={"dim": 0})
    case(op + " dim 1 keepdim", op, lambda x, op=op: getattr(torch, op)(x, 1, keepdim=True),
         [[[0, 1, 1], [0, 0, 0], [1, 2, 3]]], args={"dim": 1, "keepdim": True})

# ---- where, masked_fill ----
wc = [1, 0, 1, 0, 1, 0]
wa = [1, 2, inf, 4, nan, 6]
wb = [10, nan, 30, -inf, 50, 60]
case("where", "where", lambda c, a, b: torch.where(c != 0, a, b), [wc, wa, wb], grads=[False, True, True])
case("where nan cond", "where", lambda c, a, b: torch.where(c != 0, a, b), [[nan, 0, 2], [1, 2, 3], [4, 5, 6]],
     grads=[False, True, True])
case("where broadcast", "where", lambda c, a, b: torch.where(c != 0, a, b),
     [[[1], [0]], torch.randn(3), torch.randn(2, 1)], grads=[False, True, True])
case("where number b", "where", lambda c, a: torch.where(c != 0, a, torch.tensor(-1.0)), [wc, wa],
     grads=[False, True], args={"b": -1})
case("where number a", "where", lambda c, b: torch.where(c != 0, torch.tensor(inf), b), [wc, wb],
     grads=[False, True], args={"a": "inf"})
case("masked_fill", "masked_fill", lambda x, m: x.masked_fill(m != 0, -inf), [[1, 2, 3, nan, inf, 6], wc],
     grads=[True, False], args={"value": "-inf"})
case("masked_fill broadcast", "masked_fill", lambda x, m: x.masked_fill(m != 0, 7), [torch.randn(2, 3), [[1], [0]]],
     grads=[True, False], args={"value": 7})

# ---- tril, triu ----
tx = torch.randn(3, 4)
tx[0, 3] = inf
tx[2, 0] = nan
for k in [0, 1, -1, 5, -5]:
    case("tril k=%d" % k, "tril", lambda x, k=k: x.tril(k), [tx], args={"k": k})
    case("triu k=%d" % k, "triu", lambda x, k=k: x.triu(k), [tx], args={"k": k})
case("tril batched", "tril", lambda x: x.tril(), [torch.randn(2, 3, 3)], args={"k": 0})
case("triu wide", "triu", lambda x: x.triu(1), [torch.randn(2, 5)], args={"k": 1})

# ---- maximum, minimum ----
xa = [1, 2, 3, nan, 1, nan, inf, -inf, 0, -0.0, 2]
xb = [1, 3, 2, 1, nan, nan, inf, 5, -0.0, 0, -inf]
for op in ["maximum", "minimum"]:
    case(op, op, getattr(torch, op), [xa, xb])
    case(op + " broadcast", op, getattr(torch, op), [torch.randn(3, 1), torch.randn(1, 4)])
    case(op + " ties broadcast", op, getattr(torch, op), [[[1, 2], [3, 4]], [[2, 2]]])
    case(op + " inf and max float", op, getattr(torch, op), [fa, fb])
    case(op + " one side", op, getattr(torch, op), [[1, 5, 3], [2, 2, 2]], grads=[True, False])

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "testdata", "torch_math.json")
with open(out, "w") as f:  # one case a line, so that a diff shows which changed
    head = json.dumps({"torch": torch.__version__, "script": "scripts/reference/math.py"})
    f.write(head[:-1] + ', "cases": [\n')
    f.write(",\n".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases))
    f.write("\n]}\n")
print("wrote %d cases to %s" % (len(cases), os.path.normpath(out)))
