#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's pooling options (issue 12): max
pooling with dilation and ceil_mode, average pooling with ceil_mode,
count_include_pad=False and divisor_override, and the 1-d forms.

Run by hand where PyTorch is installed (written against torch 1.13):

    /usr/bin/python3 scripts/reference/pool.py

It writes core/testdata/torch_pool.json in the format of torch_conv.json
(see conv.py): each case's op, its arguments, its input, the output, a
fixed cotangent and the gradient of sum(output * cotangent).
core/ops_conv_test.go reads it. CI does not run PyTorch.
"""

import torch
import torch.nn.functional as F

from torchref import make_case, write_cases

torch.manual_seed(15)

cases = []


def pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


def distinct(shape):
    """Values 0.05 apart or more, in a random order: a max has no near tie
    that the central differences of gradcheck (step 1e-2) would cross."""
    n = 1
    for s in shape:
        n *= s
    return ((torch.randperm(n).float() - n / 2) * 0.05).reshape(shape)


def max_case(name, shape, k, stride=None, padding=0, dilation=1, ceil_mode=False):
    stride = k if stride is None else stride
    args = {"kernel": pair(k), "stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "ceil_mode": ceil_mode}
    cases.append(make_case(name, "max_pool2d", lambda t: F.max_pool2d(t, k, stride, padding, dilation, ceil_mode),
                           [distinct(shape)], args=args))


def avg_case(name, shape, k, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    stride = k if stride is None else stride
    args = {"kernel": pair(k), "stride": pair(stride), "padding": pair(padding), "ceil_mode": ceil_mode,
            "count_include_pad": count_include_pad, "divisor_override": divisor_override or 0}
    cases.append(make_case(name, "avg_pool2d",
                           lambda t: F.avg_pool2d(t, k, stride, padding, ceil_mode, count_include_pad, divisor_override),
                           [torch.randn(*shape)], args=args))


def pool1d_case(name, op, shape, k, stride=None, padding=0, **kw):
    stride = k if stride is None else stride
    f = {"max_pool1d": F.max_pool1d, "avg_pool1d": F.avg_pool1d}[op]
    args = {"kernel": k, "stride": stride, "padding": padding, "dilation": kw.get("dilation", 1),
            "ceil_mode": kw.get("ceil_mode", False), "count_include_pad": kw.get("count_include_pad", True)}
    x = distinct(shape) if op == "max_pool1d" else torch.randn(*shape)
    cases.append(make_case(name, op, lambda t: f(t, k, stride, padding, **kw), [x], args=args))


# max_pool2d: dilation, ceil_mode (the last window runs past the input), and
# PyTorch's rule that drops a last window starting past the input and its
# left padding (7 + 1 padding, kernel 2, stride 3: 3 windows, not 4).
max_case("max_pool2d dilation 2", (2, 2, 7, 6), 2, 1, 0, 2)
max_case("max_pool2d dilation (2, 3) padding 1 stride 2", (1, 2, 8, 9), 3, 2, 1, (2, 3))
max_case("max_pool2d ceil_mode", (1, 2, 5, 7), 2, ceil_mode=True)
max_case("max_pool2d ceil_mode stride 2 kernel 3", (2, 1, 6, 8), 3, 2, ceil_mode=True)
max_case("max_pool2d ceil_mode drops the window starting in the right padding", (1, 1, 7, 7), 2, 3, 1, ceil_mode=True)
max_case("max_pool2d ceil_mode dilation padding", (1, 2, 9, 8), 3, (2, 3), 1, 2, ceil_mode=True)
max_case("max_pool2d ceil_mode kernel larger than the input", (1, 1, 2, 2), 3, 3, ceil_mode=True)

# avg_pool2d: the divisor rules. count_include_pad divides by the window
# clipped to the padded input (in ceil mode a window past it is smaller);
# count_include_pad=False by its elements inside the input.
avg_case("avg_pool2d ceil_mode", (1, 2, 5, 7), 2, ceil_mode=True)
avg_case("avg_pool2d ceil_mode padding counts the padding", (1, 2, 6, 7), 3, 2, 1, ceil_mode=True)
avg_case("avg_pool2d count_include_pad false", (2, 1, 6, 5), 3, 2, 1, count_include_pad=False)
avg_case("avg_pool2d count_include_pad false ceil_mode", (1, 2, 7, 6), (3, 2), (2, 2), (1, 1), ceil_mode=True, count_include_pad=False)
avg_case("avg_pool2d ceil_mode drops the window starting in the right padding", (1, 1, 7, 7), 2, 3, 1, ceil_mode=True)
avg_case("avg_pool2d divisor_override", (1, 2, 5, 6), 2, 1, 1, divisor_override=3)
avg_case("avg_pool2d divisor_override ceil_mode", (1, 1, 5, 5), 2, ceil_mode=True, divisor_override=5)

pool1d_case("max_pool1d dilation ceil_mode", "max_pool1d", (2, 3, 10), 3, 2, 1, dilation=2, ceil_mode=True)
pool1d_case("max_pool1d plain", "max_pool1d", (2, 9), 2)
pool1d_case("avg_pool1d ceil_mode count_include_pad false", "avg_pool1d", (2, 2, 8), 3, 2, 1, ceil_mode=True, count_include_pad=False)
pool1d_case("avg_pool1d padding", "avg_pool1d", (1, 2, 7), 4, 3, 2)

# NaN and the infinities: a NaN is its window's maximum and takes the
# gradient; +inf wins; a window of -inf gives -inf, its gradient to its
# first element. (With two NaNs in a window PyTorch picks the last one,
# val > max || isnan(val): core/ops_conv_test.go checks that on the CPU.)
nan, inf = float("nan"), float("inf")
special = torch.tensor([[[[1, nan, 3, inf, 0.5, -1],
                          [2, 0, 4, 5, -2, -3],
                          [-inf, -inf, 7, nan, 1, nan],
                          [-inf, -inf, 6.5, 6, 2, 0]]]])
args = {"kernel": [2, 2], "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1], "ceil_mode": False}
cases.append(make_case("max_pool2d nan and inf", "max_pool2d", lambda t: F.max_pool2d(t, 2), [special], args=args))

path = write_cases("torch_pool.json", "scripts/reference/pool.py", cases)
print("wrote", len(cases), "cases to", path)
