"""Writes PyTorch's values for gglua's optimizer parameter groups (issue 12).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/optim_groups.py

It writes core/testdata/torch_optim_groups.json. Each case runs a torch
optimizer made from two parameter groups (a weight w [3, 2] and a bias b
[2]; each group's own settings override the defaults given beside them)
for a few steps on the fixed loss sum((x @ w + b - 1)^2), with a scheduler
stepped after every optimizer step, and records after every step the
parameters, every group's lr and the optimizer's state (momentum buffers,
moments) by gglua's names ("state.<i>.<slot>", i 1-based). A case may set
a group's lr by hand after a step ("set_lr": {"after": step, "group":
1-based, "lr": value}), as torch users write param_groups[i]["lr"] = v.
The Go test (core/optim_test.go) reads the file; CI does not run PyTorch.
The data and loss are those of the "optim" section of torch_losses.json
(scripts/reference/losses.py), whose runs this file extends.
"""

import torch

from torchref import enc, optim_fixture, param_groups_json, scheduler, torch_settings, tensor_json, write_cases


SLOTS = {"sgd": ["momentum_buffer"], "adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"]}


def run(name, kind, defaults, groups, sched, steps=5, set_lr=None):
    w, b, x, w0, b0 = optim_fixture()
    tg = [dict(torch_settings(g), params=[p]) for g, p in zip(groups, [w, b])]
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind](tg, **torch_settings(defaults))
    s = scheduler(opt, sched)
    trace = []
    for i in range(1, steps + 1):
        opt.zero_grad()
        loss = ((x @ w + b - 1.0) ** 2).sum()
        loss.backward()
        opt.step()
        s.step()
        if set_lr and set_lr["after"] == i:
            opt.param_groups[set_lr["group"] - 1]["lr"] = set_lr["lr"]
        state = {}
        for j, p in enumerate([w, b]):
            for slot in SLOTS[kind]:
                if slot in opt.state[p]:
                    state["state.%d.%s" % (j + 1, slot)] = enc(opt.state[p][slot].reshape(-1).tolist())
        trace.append({"w": enc(w.detach().reshape(-1).tolist()), "b": enc(b.detach().reshape(-1).tolist()),
                      "lrs": [g["lr"] for g in opt.param_groups], "state": state})
    return {"name": name, "kind": kind, "defaults": defaults, "groups": groups, "scheduler": sched,
            "set_lr": set_lr, "w": tensor_json(w0), "b": tensor_json(b0), "x": tensor_json(x),
            "steps": trace, "param_groups": param_groups_json(opt)}


step_lr = {"kind": "step", "step_size": 2, "gamma": 0.5}
cases = [
    run("sgd momentum, weight decay and lr per group", "sgd", {"lr": 0.1, "momentum": 0.9},
        [{"weight_decay": 0.1, "lr": 0.05}, {"weight_decay": 0.0}], step_lr),
    run("sgd momentum, dampening and nesterov per group", "sgd", {"lr": 0.02, "momentum": 0.5, "dampening": 0.1},
        [{"weight_decay": 0.05}, {"momentum": 0.8, "dampening": 0.0, "nesterov": True, "lr": 0.05}],
        {"kind": "cosine", "t_max": 3, "eta_min": 0.001}),
    run("sgd lr set by hand mid-schedule", "sgd", {"lr": 0.1, "momentum": 0.9},
        [{"weight_decay": 0.1, "lr": 0.05}, {}], step_lr, set_lr={"after": 3, "group": 1, "lr": 0.02}),
    run("adam betas, eps and weight decay per group", "adam", {"lr": 0.1},
        [{"weight_decay": 0.1, "lr": 0.05, "betas": [0.8, 0.99], "eps": 1e-6}, {"weight_decay": 0.0}], step_lr),
    run("adamw two groups, cosine", "adamw", {"lr": 0.1, "weight_decay": 0.01},
        [{"weight_decay": 0.1, "lr": 0.05}, {"weight_decay": 0.0}], {"kind": "cosine", "t_max": 3, "eta_min": 0.0}),
    run("adamw two groups, step lr", "adamw", {"lr": 0.1},
        [{"weight_decay": 0.1, "lr": 0.05}, {"weight_decay": 0.0}], step_lr),
]

out = write_cases("torch_optim_groups.json", "scripts/reference/optim_groups.py", cases)
print(f"{len(cases)} optimizer runs -> {out}")
