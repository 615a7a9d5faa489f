#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's numerics tests (issue 13, items 13-14).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/numerics.py

It writes core/testdata/torch_numerics.json. Each case holds an op, its
arguments, its float32 inputs, the output, a fixed cotangent and the
gradients of sum(output * cotangent) with respect to every input that needs
one (null otherwise). Non-finite numbers are the strings "nan", "inf" and
"-inf". Labels and dims are 0-based, as PyTorch takes them; the Go tests
(core/*_test.go, TestMatchesTorch*) read the file and compare. CI does not
run PyTorch.
"""
import json
import math
import os

import torch
import torch.nn.functional as F

nan, inf = float("nan"), float("inf")
torch.manual_seed(13)


from torchref import enc, make_case  # noqa: E402 (shared helpers)


cases = []


def case(name, op, f, inputs, grads=None, args=None):
    """inputs: lists or tensors (float32); grads: which inputs need one."""
    cases.append(make_case(name, op, f, inputs, grads, args))


# ---- log_softmax (ops_nn) ----
case("log_softmax far below the max", "log_softmax", lambda x: x.log_softmax(1), [[[0, -200, 1e4]]], args={"dim": 1})
case("log_softmax rows", "log_softmax", lambda x: x.log_softmax(1), [torch.randn(3, 5) * 10], args={"dim": 1})
case("log_softmax dim 0", "log_softmax", lambda x: x.log_softmax(0), [torch.randn(4, 3) * 3], args={"dim": 0})
case("log_softmax middle dim", "log_softmax", lambda x: x.log_softmax(1), [torch.randn(2, 3, 4) * 30], args={"dim": 1})
case("log_softmax inf and nan", "log_softmax", lambda x: x.log_softmax(1),
     [[[0, -inf, 1], [-inf, -inf, -inf], [2, 3, nan]]], args={"dim": 1})

# ---- pow, tensor ^ number ----
xs = [-1.5, -1, -0.5, 0, 0.5, 1, 2, inf, -inf, nan]
for p in [0, 1, 2, 3, 17, -1, -2, -3, 0.5, -0.5, 1.5, -1.5, 0.3, 65, 100, 2 ** 30, inf, -inf, nan]:
    case("pow x^%s" % p, "pow_scalar", lambda x, p=p: x ** p, [xs], args={"exponent": enc(p)})

# ---- pow, number ^ tensor ----
ys = [2, 3, 0.5, 0, -1, -2.5, 1e-3, inf, -inf, nan]
for s in [-2, -1, 0, 0.5, 1, 2, 10]:
    case("pow %s^y" % s, "rpow", lambda y, s=s: s ** y, [ys], args={"base": enc(s)})

# ---- pow, tensor ^ tensor ----
case("pow x^y specials", "pow", lambda x, y: x ** y,
     [[-2, -2, 0, 0, 0, nan, 1, 2, -inf, -inf, inf, 0, -3, 1.5, -1, 4],
      [2, 3, 0, -1, 2, 0, nan, 0.5, 0.5, 3, -1, 0.5, -2, -inf, inf, -0.5]])
case("pow x^y broadcast", "pow", lambda x, y: x ** y, [torch.rand(2, 3) + 0.5, torch.randn(3)])
case("pow x^y broadcast first", "pow", lambda x, y: x ** y, [torch.rand(3) + 0.5, torch.randn(2, 3)])

# ---- gelu ----
gx = [0, 1, -1, 3, -3, 0.5, -0.25, 10, -10, 1e-30, inf, -inf, nan]
case("gelu exact", "gelu", lambda x: F.gelu(x), [gx], args={"approximate": "none"})
case("gelu tanh", "gelu", lambda x: F.gelu(x, approximate="tanh"), [gx], args={"approximate": "tanh"})

# ---- clamp, relu, abs ----
cx = [nan, -1, 1, 2, -inf, inf, 0.5, -0.7, 0]
case("clamp both", "clamp", lambda x: x.clamp(-1, 1), [cx], args={"min": -1, "max": 1})
case("clamp min", "clamp", lambda x: x.clamp(min=-1), [cx], args={"min": -1, "max": "inf"})
case("clamp max", "clamp", lambda x: x.clamp(max=0.5), [cx], args={"min": "-inf", "max": 0.5})
rx = [nan, 0, 1, -1, inf, -inf, 2.5]
case("relu", "relu", lambda x: x.relu(), [rx])
case("abs", "abs", lambda x: x.abs(), [rx])


# ---- cross_entropy (losses) ----
def ce_labels(name, logits, labels, reduction="mean", label_smoothing=0.0, ignore_index=None, weight=None):
    kw = {"reduction": reduction, "label_smoothing": label_smoothing}
    if ignore_index is not None:
        kw["ignore_index"] = ignore_index
    if weight is not None:
        kw["weight"] = torch.tensor(weight, dtype=torch.float32)
    target = torch.tensor(labels)
    case(name, "cross_entropy", lambda x: F.cross_entropy(x, target, **kw), [logits],
         args={"labels": labels, "reduction": reduction, "label_smoothing": label_smoothing,
               "ignore_index": ignore_index, "weight": enc(weight)})


def ce_probs(name, logits, target, reduction="mean", label_smoothing=0.0, weight=None, target_grad=True):
    kw = {"reduction": reduction, "label_smoothing": label_smoothing}
    if weight is not None:
        kw["weight"] = torch.tensor(weight, dtype=torch.float32)
    case(name, "cross_entropy", lambda x, t: F.cross_entropy(x, t, **kw), [logits, target], grads=[True, target_grad],
         args={"reduction": reduction, "label_smoothing": label_smoothing, "weight": enc(weight)})


L45 = torch.randn(4, 5) * 2
L54 = torch.randn(5, 4) * 2
ninf = [[0, -inf, 1], [2, 1, 0]]
for red in ["mean", "sum", "none"]:
    ce_labels("ce labels " + red, L45, [0, 3, 4, 1], reduction=red)
    ce_labels("ce labels -inf logit " + red, ninf, [0, 2], reduction=red)
    ce_labels("ce weight " + red, L54, [0, 3, 2, 1, 3], reduction=red, weight=[1, 2, 0.5, 3])
    ce_labels("ce ignore " + red, L54, [1, 0, 1, 3, 2], reduction=red, ignore_index=1)
    ce_labels("ce ignore out of range " + red, L54, [-100, 0, 2, -100, 3], reduction=red, ignore_index=-100)
    ce_labels("ce all ignored " + red, L54[:2], [2, 2], reduction=red, ignore_index=2)
    ce_labels("ce smoothing " + red, L45, [0, 3, 4, 1], reduction=red, label_smoothing=0.2)
    ce_labels("ce smoothing -inf logit " + red, ninf, [0, 2], reduction=red, label_smoothing=0.1)
    ce_labels("ce smoothing 1 " + red, L45, [0, 3, 4, 1], reduction=red, label_smoothing=1.0)
    ce_labels("ce weight smoothing ignore " + red, L54, [1, 0, 1, 3, 2], reduction=red,
              label_smoothing=0.3, ignore_index=1, weight=[1, 2, 0.5, 3])
    ce_labels("ce weight ignore " + red, L54, [1, 0, 1, 3, 2], reduction=red, ignore_index=3, weight=[0.5, 2, 1, 3])
    P54 = torch.softmax(torch.randn(5, 4), 1)
    ce_probs("ce probs " + red, L54, P54, reduction=red)
    ce_probs("ce probs not summing to 1 " + red, L54, torch.rand(5, 4), reduction=red)
    ce_probs("ce probs weight smoothing " + red, L54, torch.rand(5, 4), reduction=red, label_smoothing=0.25,
             weight=[1, 2, 0.5, 3])
    ce_probs("ce probs -inf logit " + red, ninf, [[1, 0, 0], [0, 0, 1]], reduction=red, target_grad=False)

# ---- bce_loss (losses) ----
case("bce at 0 and 1", "bce_loss", lambda p, y: F.binary_cross_entropy(p, y),
     [[0, 1, 0, 1, 0.5, 1e-30, 0.2, 0.9], [0, 1, 1, 0, 0.3, 1, 0.4, 1]])
case("bce", "bce_loss", lambda p, y: F.binary_cross_entropy(p, y), [torch.rand(3, 4) * 0.98 + 0.01, torch.rand(3, 4)])

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "testdata", "torch_numerics.json")
with open(out, "w") as f:  # one case a line, so that a diff shows which changed
    head = json.dumps({"torch": torch.__version__, "script": "scripts/reference/numerics.py"})
    f.write(head[:-1] + ', "cases": [\n')
    f.write(",\n".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases))
    f.write("\n]}\n")
print("wrote %d cases to %s" % (len(cases), os.path.normpath(out)))
