#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's transposed convolutions (issue 38).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/conv_transpose.py

It writes core/testdata/torch_conv_transpose.json in the format of
torch_conv.json (see conv.py); core/ops_conv_transpose_test.go reads it.
"""
import torch
import torch.nn.functional as F

from torchref import make_case, write_cases

torch.manual_seed(38)
cases = []


def pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def ct2d(name, xs, ws, bias, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    inputs = [torch.randn(*xs), torch.randn(*ws)] + ([torch.randn(ws[1] * groups)] if bias else [])
    args = {"stride": pair(stride), "padding": pair(padding), "output_padding": pair(output_padding),
            "groups": groups, "dilation": pair(dilation)}
    cases.append(make_case(name, "conv_transpose2d", lambda *t: F.conv_transpose2d(
        t[0], t[1], t[2] if bias else None, stride, padding, output_padding, groups, dilation), inputs, args=args))


def ct1d(name, xs, ws, bias, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    inputs = [torch.randn(*xs), torch.randn(*ws)] + ([torch.randn(ws[1] * groups)] if bias else [])
    args = {"stride": stride, "padding": padding, "output_padding": output_padding, "groups": groups, "dilation": dilation}
    cases.append(make_case(name, "conv_transpose1d", lambda *t: F.conv_transpose1d(
        t[0], t[1], t[2] if bias else None, stride, padding, output_padding, groups, dilation), inputs, args=args))


ct2d("conv_transpose2d plain", (2, 3, 4, 5), (3, 4, 3, 3), True)
ct2d("conv_transpose2d dcgan stride 2 padding 1", (2, 4, 3, 3), (4, 2, 4, 4), True, stride=2, padding=1)
ct2d("conv_transpose2d output_padding", (1, 2, 3, 4), (2, 3, 3, 3), True, stride=2, padding=1, output_padding=1)
ct2d("conv_transpose2d pairs", (1, 2, 4, 3), (2, 3, 3, 2), True, stride=(2, 1), padding=(1, 0), output_padding=(1, 0),
     dilation=(1, 2))
ct2d("conv_transpose2d groups no bias", (2, 4, 3, 3), (4, 3, 2, 2), False, stride=2, groups=2)
ct2d("conv_transpose2d dilation output_padding", (1, 1, 3, 3), (1, 2, 2, 2), True, dilation=2, output_padding=1)
ct2d("conv_transpose2d unbatched", (3, 2, 2), (3, 2, 3, 3), True, stride=3, padding=2)
ct1d("conv_transpose1d stride padding output_padding", (2, 3, 5), (3, 2, 4), True, stride=3, padding=1, output_padding=2)
ct1d("conv_transpose1d groups dilation", (1, 4, 6), (4, 1, 3), False, groups=2, dilation=2)
ct1d("conv_transpose1d unbatched", (2, 4), (2, 3, 2), True, stride=2)

print("wrote", write_cases("torch_conv_transpose.json", "scripts/reference/conv_transpose.py", cases))
