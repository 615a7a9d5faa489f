#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's interpolate (issue 38).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/interpolate.py

It writes core/testdata/torch_interpolate.json in the format of
torch_conv.json (see conv.py); args hold size or scale_factor, mode and
align_corners. core/ops_interpolate_test.go reads it.
"""
import torch
import torch.nn.functional as F

from torchref import make_case, write_cases

torch.manual_seed(38)
cases = []


def case(name, shape, mode, size=None, scale=None, align=None, recompute=None):
    def f(x):
        return F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align,
                             recompute_scale_factor=recompute)
    dims = len(shape) - 2
    args = {"mode": mode, "align_corners": bool(align), "recompute": bool(recompute)}
    if size is not None:
        args["size"] = list(size) if isinstance(size, (list, tuple)) else [size] * dims
    else:
        args["scale"] = list(scale) if isinstance(scale, (list, tuple)) else [scale] * dims
    cases.append(make_case(name, "interpolate", f, [torch.randn(*shape)], args=args))


case("bilinear up 2", (1, 2, 3, 4), "bilinear", scale=2)
case("bilinear to a size", (2, 1, 4, 5), "bilinear", size=(7, 3))
case("bilinear align_corners", (1, 2, 3, 4), "bilinear", size=(5, 9), align=True)
case("bilinear fractional scale", (1, 1, 5, 6), "bilinear", scale=(1.7, 0.6))
case("bilinear align_corners to one row", (1, 1, 4, 4), "bilinear", size=(1, 6), align=True)
case("linear", (2, 3, 5), "linear", size=8)
case("linear align_corners down", (1, 2, 9), "linear", size=4, align=True)
case("linear scale 2.5", (1, 1, 4), "linear", scale=2.5)
case("nearest fractional", (1, 2, 5, 3), "nearest", size=(7, 4))
case("nearest scale 1.5", (1, 1, 4, 6), "nearest", scale=1.5)
case("nearest down", (1, 1, 7, 9), "nearest", size=(3, 4))
case("nearest 1d", (2, 1, 5), "nearest", size=12)
case("nearest-exact", (1, 1, 5, 3), "nearest-exact", size=(8, 7))
case("nearest-exact scale", (1, 2, 4), "nearest-exact", scale=1.75)
case("nearest scale 1.2 keeps the size", (1, 1, 3, 3), "nearest", scale=1.2)
case("nearest scale 2.3 doubles", (1, 1, 3, 3), "nearest", scale=2.3)
case("bilinear recompute_scale_factor", (1, 1, 5, 6), "bilinear", scale=(1.7, 0.6), recompute=True)
# Not here: a 1-d nearest at a scale_factor whose output is the input's
# size or twice it ((1, 2, 3) at 1.2 or 2.3). torch 1.13's forward
# computes from the factor ([x0, x0, x1] at 1.2) but its backward takes
# the 2-d kernel's shortcuts (the identity), so its gradient is not its
# forward's; gglua's is (docs/PYTORCH.md).
case("linear scale 1.2 keeps the size", (1, 1, 3), "linear", scale=1.2)
case("bilinear scale 1.2, H kept", (1, 1, 3, 5), "bilinear", scale=1.2)

print("wrote", write_cases("torch_interpolate.json", "scripts/reference/interpolate.py", cases))
