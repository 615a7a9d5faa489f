"""Writes PyTorch's values for gglua's RMSprop, Adagrad, Adadelta, Adamax,
NAdam and RAdam (core/optim_rules.go, issue 21).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/optim_rules.py

It writes core/testdata/torch_optim_rules.json. Each case runs a torch
optimizer of two parameter groups (w [3, 2] and b [2], each group's own
settings over the defaults) with StepLR for 8 steps on the fixed loss
sum((x @ w + b - 1)^2) of optim_groups.py, and records after every step the
parameters, the groups' lrs and the state tensors by gglua's names
("state.<i>.<slot>"). Two forms are torch 2's, not 1.13's, and are made
here from 1.13's parts: NAdam runs with foreach=True (1.13's single-tensor
NAdam multiplies mu_t into mu_product_next twice, a bug torch 2 fixed; its
multi-tensor form is torch 2's), and decoupled_weight_decay (torch 2's
NAdam and RAdam) is the parameter shrunk by lr * weight_decay before a
step without weight decay.
"""

import torch

from torchref import enc, optim_fixture, scheduler, torch_settings, tensor_json, write_cases

SLOTS = {
    "rmsprop": ["square_avg", "momentum_buffer", "grad_avg"],
    "adagrad": ["sum"],
    "adadelta": ["square_avg", "acc_delta"],
    "adamax": ["exp_avg", "exp_inf"],
    "nadam": ["exp_avg", "exp_avg_sq"],
    "radam": ["exp_avg", "exp_avg_sq"],
}
CLASSES = {"rmsprop": torch.optim.RMSprop, "adagrad": torch.optim.Adagrad, "adadelta": torch.optim.Adadelta,
           "adamax": torch.optim.Adamax, "nadam": torch.optim.NAdam, "radam": torch.optim.RAdam}


def run(name, kind, defaults, groups, steps=8):
    w, b, x, w0, b0 = optim_fixture()
    merged = [dict(defaults, **g) for g in groups]
    decoupled = [g.pop("decoupled_weight_decay", False) for g in merged]
    torch_groups = []
    for g, p, dec in zip(groups, [w, b], decoupled):
        tg = dict(torch_settings(g), params=[p])
        tg.pop("decoupled_weight_decay", None)
        if dec:
            tg["weight_decay"] = 0.0
        torch_groups.append(tg)
    extra = {"foreach": True} if kind == "nadam" else {}
    opt = CLASSES[kind](torch_groups, **torch_settings(defaults), **extra)
    sched = {"kind": "step", "step_size": 3, "gamma": 0.5}
    s = scheduler(opt, sched)
    trace = []
    for i in range(1, steps + 1):
        opt.zero_grad()
        loss = ((x @ w + b - 1.0) ** 2).sum()
        loss.backward()
        with torch.no_grad():
            for g, tg, p, dec in zip(merged, opt.param_groups, [w, b], decoupled):
                if dec:
                    p.mul_(1 - tg["lr"] * g.get("weight_decay", 0.0))
        opt.step()
        s.step()
        state = {}
        for j, p in enumerate([w, b]):
            for slot in SLOTS[kind]:
                if slot in opt.state[p]:
                    state["state.%d.%s" % (j + 1, slot)] = enc(opt.state[p][slot].reshape(-1).tolist())
        trace.append({"w": enc(w.detach().reshape(-1).tolist()), "b": enc(b.detach().reshape(-1).tolist()),
                      "lrs": [g["lr"] for g in opt.param_groups], "state": state})
    return {"name": name, "kind": kind, "defaults": defaults, "groups": groups, "scheduler": sched,
            "w": tensor_json(w0), "b": tensor_json(b0), "x": tensor_json(x), "steps": trace}


cases = [
    run("rmsprop alpha, weight decay and lr per group", "rmsprop", {"lr": 0.01},
        [{"alpha": 0.9, "weight_decay": 0.1, "lr": 0.02}, {}]),
    run("rmsprop centered with momentum", "rmsprop", {"lr": 0.01, "momentum": 0.9, "centered": True},
        [{"centered": False, "eps": 1e-4}, {"momentum": 0.0}]),
    run("adagrad lr decay and initial accumulator", "adagrad", {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.5},
        [{"weight_decay": 0.1}, {"eps": 1e-6}]),
    run("adadelta rho and eps per group", "adadelta", {"lr": 1.0},
        [{"rho": 0.8, "weight_decay": 0.1}, {"eps": 1e-4}]),
    run("adamax betas and weight decay per group", "adamax", {"lr": 0.05},
        [{"betas": [0.8, 0.99], "weight_decay": 0.1}, {}]),
    run("nadam momentum decay per group", "nadam", {"lr": 0.05},
        [{"momentum_decay": 0.01, "weight_decay": 0.1}, {"betas": [0.8, 0.99]}]),
    run("nadam decoupled weight decay", "nadam", {"lr": 0.05, "weight_decay": 0.1},
        [{"decoupled_weight_decay": True}, {}]),
    run("radam through the rectification", "radam", {"lr": 0.05},
        [{"betas": [0.9, 0.99], "weight_decay": 0.1}, {}]),
    run("radam decoupled weight decay", "radam", {"lr": 0.05, "weight_decay": 0.1, "betas": [0.8, 0.99]},
        [{"decoupled_weight_decay": True}, {"eps": 1e-3}]),
]

out = write_cases("torch_optim_rules.json", "scripts/reference/optim_rules.py", cases)
print(f"{len(cases)} optimizer runs -> {out}")
