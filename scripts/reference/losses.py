#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's losses and optimizer parameter groups
(issue 12).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/losses.py

It writes core/testdata/torch_losses.json, in the layout of
torch_numerics.json (scripts/reference/numerics.py): "cases" holds, per
loss case, the op, its arguments, the float32 inputs, the output, a fixed
cotangent and the gradients of sum(output * cotangent) for the inputs that
need one (null otherwise). Labels are 0-based, as PyTorch takes them.
"optim" holds optimizers with two parameter groups (one without weight
decay, one with, their own lr), run for a few steps on a fixed quadratic
loss, with a StepLR moving both groups' rates: the parameters after every
step. The Go tests (core/losses_test.go, core/optim_test.go) read the file;
CI does not run PyTorch.
"""
import math

import torch
import torch.nn.functional as F

torch.manual_seed(12)


from torchref import enc, make_case, optim_fixture, tensor_json, write_cases  # noqa: E402 (shared helpers)


cases = []


def case(name, op, f, inputs, grads, args=None):
    cases.append(make_case(name, op, f, inputs, grads, args))


REDUCTIONS = ["mean", "sum", "none"]

# ---- nll_loss: log-probabilities [N, C], 0-based labels ----
logp = F.log_softmax(torch.randn(4, 3) * 2, dim=1).detach()
logp[2, 0] = -math.inf  # a class of probability 0, not picked
labels = [1, 0, 2, 2]
weight = [0.5, 2.0, 1.5]
for red in REDUCTIONS:
    case(f"nll_loss {red}", "nll_loss", lambda x, red=red: F.nll_loss(x, torch.tensor(labels), reduction=red),
         [logp], [True], {"labels": labels, "reduction": red})
    case(f"nll_loss weight ignore_index {red}", "nll_loss",
         lambda x, red=red: F.nll_loss(x, torch.tensor(labels), weight=torch.tensor(weight), ignore_index=0, reduction=red),
         [logp], [True], {"labels": labels, "reduction": red, "weight": weight, "ignore_index": 0})
case("nll_loss ignore_index outside the classes", "nll_loss",
     lambda x: F.nll_loss(x, torch.tensor([1, -100, 2, 0]), ignore_index=-100),
     [logp], [True], {"labels": [1, -100, 2, 0], "ignore_index": -100})
case("nll_loss picks -inf", "nll_loss", lambda x: F.nll_loss(x, torch.tensor([1, 0, 0, 2]), reduction="none"),
     [logp], [True], {"labels": [1, 0, 0, 2], "reduction": "none"})

# ---- binary_cross_entropy_with_logits ----
logits = torch.tensor([[-100.0, -20.0, -3.0, -0.5], [0.0, 0.5, 3.0, 20.0], [100.0, 1.5, -1.0, 0.25]])
target = torch.tensor([[0.0, 1.0, 0.3, 1.0], [0.5, 0.0, 1.0, 0.0], [1.0, 0.8, 0.0, 0.6]])
pos_weight = [3.0, 0.5, 1.0, 2.0]
bce_weight = [[1.0], [0.5], [2.0]]
for red in REDUCTIONS:
    case(f"bce_with_logits {red}", "binary_cross_entropy_with_logits",
         lambda x, y, red=red: F.binary_cross_entropy_with_logits(x, y, reduction=red),
         [logits, target], [True, True], {"reduction": red})
    case(f"bce_with_logits pos_weight {red}", "binary_cross_entropy_with_logits",
         lambda x, y, red=red: F.binary_cross_entropy_with_logits(x, y, pos_weight=torch.tensor(pos_weight), reduction=red),
         [logits, target], [True, True], {"reduction": red, "pos_weight": pos_weight})
case("bce_with_logits weight and pos_weight", "binary_cross_entropy_with_logits",
     lambda x, y: F.binary_cross_entropy_with_logits(x, y, weight=torch.tensor(bce_weight), pos_weight=torch.tensor(pos_weight)),
     [logits, target], [True, True], {"pos_weight": pos_weight, "weight": bce_weight})
case("bce_with_logits extreme logits wrong way", "binary_cross_entropy_with_logits",
     lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
     [[-100.0, 100.0, -88.0, 88.0], [1.0, 0.0, 1.0, 0.0]], [True, False], {"reduction": "none"})

# ---- l1, smooth_l1, huber: kinks included (d = 0, |d| = beta) ----
x = torch.tensor([[0.0, 1.5, -2.0, 0.3], [4.0, -0.2, 1.0, -7.5]])
y = torch.tensor([[0.0, 0.5, 0.5, 0.3], [-1.0, 0.6, 2.0, 0.0]])  # d: 0, 1, -2.5, 0, 5, -0.8, -1, -7.5
for red in REDUCTIONS:
    case(f"l1_loss {red}", "l1_loss", lambda a, b, red=red: F.l1_loss(a, b, reduction=red), [x, y], [True, True],
         {"reduction": red})
    case(f"smooth_l1_loss {red}", "smooth_l1_loss", lambda a, b, red=red: F.smooth_l1_loss(a, b, reduction=red),
         [x, y], [True, True], {"reduction": red})
    case(f"huber_loss {red}", "huber_loss", lambda a, b, red=red: F.huber_loss(a, b, reduction=red),
         [x, y], [True, True], {"reduction": red})
for beta in [0.0, 0.5, 2.5]:
    case(f"smooth_l1_loss beta {beta}", "smooth_l1_loss", lambda a, b, beta=beta: F.smooth_l1_loss(a, b, beta=beta, reduction="none"),
         [x, y], [True, True], {"reduction": "none", "beta": beta})
for delta in [0.5, 2.5]:
    case(f"huber_loss delta {delta}", "huber_loss", lambda a, b, delta=delta: F.huber_loss(a, b, delta=delta, reduction="none"),
         [x, y], [True, True], {"reduction": "none", "delta": delta})

# ---- kl_div: input log-probabilities, target probabilities (zeros included) ----
inp = F.log_softmax(torch.randn(3, 4), dim=1).detach()
tgt = torch.tensor([[0.0, 0.5, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 1.0, 0.0]])
for red in ["mean", "sum", "none", "batchmean"]:
    case(f"kl_div {red}", "kl_div", lambda a, b, red=red: F.kl_div(a, b, reduction=red),
         [inp, tgt], [True, False], {"reduction": red})
    case(f"kl_div log_target {red}", "kl_div", lambda a, b, red=red: F.kl_div(a, b, reduction=red, log_target=True),
         [inp, F.log_softmax(torch.randn(3, 4), dim=1).detach()], [True, True], {"reduction": red, "log_target": True})
case("kl_div target gradient", "kl_div", lambda a, b: F.kl_div(a, b, reduction="sum"),
     [inp, torch.tensor([[0.3, 0.5, 0.05, 0.15], [0.1, 0.2, 0.3, 0.4], [0.6, 0.1, 0.1, 0.2]])], [True, True],
     {"reduction": "sum"})
case("kl_div zero target", "kl_div", lambda a, b: F.kl_div(a, b, reduction="batchmean"),
     [inp, tgt], [True, True], {"reduction": "batchmean"})


# ---- optimizer parameter groups ----
def run_groups(kind, steps=4):
    w, b, x, w0, b0 = optim_fixture()
    groups = [{"params": [w], "weight_decay": 0.1, "lr": 0.05}, {"params": [b], "weight_decay": 0.0}]
    if kind == "sgd":
        opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9)
        defaults = {"lr": 0.1, "momentum": 0.9}
    elif kind == "adam":
        opt = torch.optim.Adam(groups, lr=0.1)
        defaults = {"lr": 0.1}
    else:
        opt = torch.optim.AdamW(groups, lr=0.1)
        defaults = {"lr": 0.1}
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    trace = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((x @ w + b - 1.0) ** 2).sum()
        loss.backward()
        opt.step()
        sched.step()
        trace.append({"w": enc(w.detach().reshape(-1).tolist()), "b": enc(b.detach().reshape(-1).tolist()),
                      "lrs": [g["lr"] for g in opt.param_groups]})
    return {"kind": kind, "defaults": defaults,
            "groups": [{"weight_decay": 0.1, "lr": 0.05}, {"weight_decay": 0.0}],
            "w": tensor_json(w0), "b": tensor_json(b0), "x": tensor_json(x), "steps": trace}


optim_cases = [run_groups(k) for k in ["sgd", "adam", "adamw"]]

out = write_cases("torch_losses.json", "scripts/reference/losses.py", cases, optim=optim_cases)
print(f"{len(cases)} loss cases, {len(optim_cases)} optimizer runs -> {out}")
