#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's convolution, pooling and normalisation
tests (issue 12).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/conv.py

It writes core/testdata/torch_conv.json, in the format of
torch_numerics.json: each case holds an op, its arguments, its float32
inputs, the output, a fixed cotangent and the gradients of
sum(output * cotangent) with respect to every input (null where none is
taken). core/ops_conv_test.go and core/ops_norm_test.go read the file. CI
does not run PyTorch.

rms_norm is PyTorch 2.4's torch.nn.functional.rms_norm, which 1.13 lacks:
it is written out here as 2.4 computes it (x * rsqrt(mean(x^2) + eps) *
weight, eps = finfo(float32).eps when None).
"""
import math

import torch
import torch.nn.functional as F

torch.manual_seed(12)


from torchref import enc, make_case, write_cases  # noqa: E402 (shared helpers)


cases = []


def case(name, op, f, inputs, grads=None, args=None, extra=None):
    """extra (may be None) gives more arguments once f has run (batch norm's
    updated running statistics)."""
    c = make_case(name, op, f, inputs, grads, args)
    if extra:
        c["args"].update(extra())
    cases.append(c)


def rnd(*shape):
    return torch.randn(*shape)


def pair(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v]


# ---- conv2d / conv1d: inputs x, w [, b]; args stride, padding, dilation, groups ----

def conv2d_case(name, xs, ws, bias, stride=1, padding=0, dilation=1, groups=1):
    inputs = [rnd(*xs), rnd(*ws)] + ([rnd(ws[0])] if bias else [])
    args = {"stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "groups": groups}
    case(name, "conv2d", lambda *t: F.conv2d(t[0], t[1], t[2] if bias else None, stride, padding, dilation, groups), inputs, args=args)


conv2d_case("conv2d plain", (2, 3, 5, 6), (4, 3, 3, 3), True)
conv2d_case("conv2d stride padding dilation pairs", (1, 2, 7, 5), (3, 2, 3, 2), True, stride=(2, 1), padding=(1, 2), dilation=(1, 2))
conv2d_case("conv2d groups 2 stride 2", (2, 4, 5, 5), (6, 2, 3, 3), True, stride=2, padding=1, groups=2)
conv2d_case("conv2d dilation 2 no bias", (1, 1, 6, 7), (2, 1, 2, 3), False, padding=1, dilation=2)
conv2d_case("conv2d depthwise", (1, 3, 4, 4), (3, 1, 3, 3), True, padding=1, groups=3)
conv2d_case("conv2d kernel as large as the padded input", (1, 2, 2, 3), (2, 2, 4, 3), True, padding=(1, 0), stride=3)


def conv1d_case(name, xs, ws, bias, stride=1, padding=0, dilation=1, groups=1):
    inputs = [rnd(*xs), rnd(*ws)] + ([rnd(ws[0])] if bias else [])
    args = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    case(name, "conv1d", lambda *t: F.conv1d(t[0], t[1], t[2] if bias else None, stride, padding, dilation, groups), inputs, args=args)


conv1d_case("conv1d stride padding", (2, 3, 9), (4, 3, 3), True, stride=2, padding=1)
conv1d_case("conv1d groups dilation no bias", (1, 4, 8), (4, 2, 2), False, dilation=3, groups=2)

# ---- pooling: args kernel, stride, padding (pairs) ----

def pool_case(name, op, f, x, k, stride=None, padding=0):
    stride = k if stride is None else stride
    args = {"kernel": pair(k), "stride": pair(stride), "padding": pair(padding)}
    case(name, op, lambda t: f(t, k, stride, padding), [x], args=args)


pool_case("max_pool2d 2", "max_pool2d", F.max_pool2d, rnd(2, 2, 5, 6), 2)
pool_case("max_pool2d 3 stride 2 padding 1", "max_pool2d", F.max_pool2d, rnd(1, 2, 7, 6), 3, 2, 1)
pool_case("max_pool2d rectangular", "max_pool2d", F.max_pool2d, rnd(1, 1, 6, 7), (2, 3), (1, 2), (1, 0))
ties = torch.tensor([[[[1, 1, 0, 2], [1, 0, 2, 2], [3, 3, 0, 0], [3, 3, 0, 0], [1, 2, 1, 2]]]], dtype=torch.float32)
pool_case("max_pool2d ties go to the first", "max_pool2d", F.max_pool2d, ties, 2, 1)
pool_case("avg_pool2d 2", "avg_pool2d", F.avg_pool2d, rnd(2, 2, 5, 6), 2)
pool_case("avg_pool2d 3 stride 2 padding 1 counts the padding", "avg_pool2d", F.avg_pool2d, rnd(1, 2, 7, 6), 3, 2, 1)
for out in [(3, 2), (1, 1)]:
    case("adaptive_avg_pool2d %dx%d" % out, "adaptive_avg_pool2d", lambda t, out=out: F.adaptive_avg_pool2d(t, out),
         [rnd(2, 3, 6, 4)], args={"output": list(out)})

# ---- normalisation ----

def bn_case(name, shape, training, affine=True, momentum=0.1, eps=1e-5):
    c = shape[1]
    rm, rv = rnd(c) * 0.5, torch.rand(c) + 0.5
    rm0, rv0 = rm.clone(), rv.clone()
    inputs = [rnd(*shape) * 2 + 1] + ([torch.rand(c) + 0.5, rnd(c)] if affine else [])
    state = {}

    def f(*t):
        state["rm"], state["rv"] = rm0.clone(), rv0.clone()
        w, b = (t[1], t[2]) if affine else (None, None)
        return F.batch_norm(t[0], state["rm"], state["rv"], w, b, training, momentum, eps)

    args = {"training": training, "momentum": momentum, "eps": eps,
            "running_mean": enc(rm0.tolist()), "running_var": enc(rv0.tolist())}
    case(name, "batch_norm", f, inputs, args=args,
         extra=lambda: {"running_mean_after": enc(state["rm"].tolist()), "running_var_after": enc(state["rv"].tolist())})


bn_case("batch_norm 1d training", (5, 3), True)
bn_case("batch_norm 1d (N, C, L) training", (3, 2, 5), True, momentum=0.3)
bn_case("batch_norm 2d training", (3, 2, 4, 5), True)
bn_case("batch_norm 2d eval", (3, 2, 4, 5), False)
bn_case("batch_norm 2d training without affine", (2, 3, 3, 3), True, affine=False, eps=1e-3)


def gn_case(name, shape, groups, affine=True, eps=1e-5):
    c = shape[1]
    inputs = [rnd(*shape) * 2 - 1] + ([torch.rand(c) + 0.5, rnd(c)] if affine else [])
    case(name, "group_norm", lambda *t: F.group_norm(t[0], groups, t[1] if affine else None, t[2] if affine else None, eps),
         inputs, args={"groups": groups, "eps": eps})


gn_case("group_norm 2d", (2, 6, 3, 4), 3)
gn_case("group_norm 1d one group per channel", (3, 4, 5), 4)
gn_case("group_norm one group without affine", (2, 4, 3), 1, affine=False, eps=1e-3)


def rms_norm(x, shape, w, eps):
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    dims = tuple(range(-len(shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y * w if w is not None else y


def rms_case(name, xshape, shape, weight=True, eps=None, scale=1.0):
    inputs = [rnd(*xshape) * scale] + ([torch.rand(*shape) + 0.5] if weight else [])
    case(name, "rms_norm", lambda *t: rms_norm(t[0], shape, t[1] if weight else None, eps), inputs,
         args={"normalized_shape": list(shape), "eps": eps})


rms_case("rms_norm last dim", (2, 3, 4), (4,))
rms_case("rms_norm last two dims eps", (2, 3, 4), (3, 4), eps=1e-6)
rms_case("rms_norm no weight default eps small values", (3, 5), (5,), weight=False, scale=1e-3)

path = write_cases("torch_conv.json", "scripts/reference/conv.py", cases)
print("wrote", len(cases), "cases to", path)
