#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's opt:add_param_group (issue 12).

Run by hand where PyTorch is installed (written against torch 1.13):

    /usr/bin/python3 scripts/reference/optim_add_group.py

It writes core/testdata/torch_optim_add_group.json. Each case makes a torch
optimizer on a weight w [3, 2] (as a list of parameters, or as one group
with its own settings), runs `before` steps, adds b [2] with
add_param_group(group) (its missing settings come from the optimizer's
defaults), makes a scheduler (or none) and runs `after` more steps, on the
fixed loss sum((x @ w + b - 1)^2) (b is in the loss from the start; before
it is added it is not updated). After every step it records w, b and every
group's lr; at the end the state_dict's param_groups. The Go test
(tests/optim_add_group_test.go) runs the same in gglua. CI does not run
PyTorch.
"""

import torch

from torchref import enc, optim_fixture, param_groups_json, scheduler, torch_settings, tensor_json, write_cases


def run(name, kind, defaults, first, group, before, after, sched=None):
    w, b, x, w0, b0 = optim_fixture()
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind]
    params = [w] if first is None else [dict(torch_settings(first), params=[w])]
    opt = cls(params, **torch_settings(defaults))
    trace = []
    s = None

    def step():
        opt.zero_grad()
        loss = ((x @ w + b - 1.0) ** 2).sum()
        loss.backward()
        opt.step()
        if s is not None:
            s.step()
        trace.append({"w": enc(w.detach().reshape(-1).tolist()), "b": enc(b.detach().reshape(-1).tolist()),
                      "lrs": [g["lr"] for g in opt.param_groups]})

    for _ in range(before):
        step()
    opt.add_param_group(dict(torch_settings(group), params=[b]))
    s = scheduler(opt, sched)
    for _ in range(after):
        step()
    return {"name": name, "kind": kind, "defaults": defaults, "first": first, "group": group,
            "before": before, "after": after, "scheduler": sched,
            "w": tensor_json(w0), "b": tensor_json(b0), "x": tensor_json(x), "steps": trace,
            "param_groups": param_groups_json(opt)}


cases = [
    run("sgd: added after two steps, settings from the defaults", "sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
        None, {}, 2, 3),
    run("sgd: the defaults, not group 1's settings; step scheduler made after", "sgd", {"lr": 0.02, "momentum": 0.5},
        {"lr": 0.05, "nesterov": True, "momentum": 0.8}, {"dampening": 0.2}, 1, 4, {"kind": "step", "step_size": 2, "gamma": 0.5}),
    run("adam: added before the first step, own lr and weight decay", "adam", {"lr": 0.1, "betas": [0.8, 0.99]},
        None, {"lr": 0.05, "weight_decay": 0.1}, 0, 4, {"kind": "step", "step_size": 2, "gamma": 0.5}),
    run("adamw: added before the first step, cosine scheduler", "adamw", {"lr": 0.1, "eps": 1e-6},
        {"weight_decay": 0.0}, {"betas": [0.5, 0.9]}, 0, 4, {"kind": "cosine", "t_max": 3, "eta_min": 0.001}),
]

out = write_cases("torch_optim_add_group.json", "scripts/reference/optim_add_group.py", cases)
print(f"{len(cases)} optimizer runs -> {out}")
