#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's activations (issue 21's item 2):
nn.leaky_relu, elu, selu, softplus, mish, hardtanh, hardswish and prelu,
their values and gradients, at the corners of each formula and at the
non-finite numbers.

Run by hand where PyTorch is installed (written against torch 1.13):

    /usr/bin/python3 scripts/reference/activations.py

It writes core/testdata/torch_activations.json: each case holds the
functional's name, its positional arguments, the float32 input (and
prelu's weight), a cotangent, the output and the gradients of
sum(output * cotangent). Non-finite numbers are "nan", "inf" and "-inf".
tests/activations_test.go runs each case in Lua and compares.
"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(21)
nan, inf = float("nan"), float("inf")


def enc(v):
    out = []
    for x in v:
        x = float(x)
        out.append("nan" if math.isnan(x) else ("inf" if x == inf else ("-inf" if x == -inf else x)))
    return out


corners = [-100, -20.5, -4, -3, -1, -0.5, 0, -0.0, 0.25, 1, 3, 4, 10, 20, 20.5, 100, nan, inf, -inf]
cases = []


def case(name, fn, f, args, x, weight=None):
    x = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    w = None
    if weight is not None:
        w = torch.tensor(weight, dtype=torch.float32, requires_grad=True)
    y = f(x, w, *args) if w is not None else f(x, *args)
    cot = torch.randn(y.shape)
    (y * cot).sum().backward()
    c = {"name": name, "fn": fn, "args": args, "shape": list(x.shape), "input": enc(x.detach().flatten()),
         "cotangent": enc(cot.flatten()), "output": enc(y.detach().flatten()), "grad_input": enc(x.grad.flatten())}
    if w is not None:
        c["weight"], c["grad_weight"] = enc(w.detach()), enc(w.grad)
    cases.append(c)


rand = (torch.randn(3, 5) * 3).tolist()
for fn, f, argsets in [
    ("leaky_relu", F.leaky_relu, [[], [0.2], [-0.5]]),
    ("elu", F.elu, [[], [0.5]]),
    ("selu", F.selu, [[]]),
    ("softplus", F.softplus, [[], [2, 10], [0.5, 5]]),
    ("mish", F.mish, [[]]),
    ("hardtanh", F.hardtanh, [[], [-3, 0.25]]),
    ("hardswish", F.hardswish, [[]]),
]:
    for a in argsets:
        case(f"{fn} {a} corners", fn, f, a, corners)
        case(f"{fn} {a} random", fn, f, a, rand)

case("prelu one slope", "prelu", F.prelu, [], corners, [0.25])
case("prelu per channel", "prelu", F.prelu, [], (torch.randn(2, 3, 4) * 2).tolist(), [0.1, -0.3, 0.7])
case("prelu per channel 2d", "prelu", F.prelu, [], [[-1, 2, -3], [0, -0.0, 5]], [0.5, 2, -1])

out = os.path.join(os.path.dirname(__file__), "..", "..", "core", "testdata", "torch_activations.json")
with open(out, "w") as fh:
    json.dump({"torch": torch.__version__, "cases": cases}, fh, indent=None)
    fh.write("\n")
print("wrote", len(cases), "cases to", os.path.normpath(out))
