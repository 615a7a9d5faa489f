#!/usr/bin/python3
"""Reference learning rates from PyTorch's schedulers, for core/lr_scheduler_test.go.

Run by hand where PyTorch is installed (Debian: apt-get install python3-torch,
then /usr/bin/python3 scripts/reference/lr_schedulers.py); it rewrites
core/testdata/lr_schedulers.json. CI never runs PyTorch: the Go tests read
the file.

Each case records the optimizer's rate after the scheduler is made (index 0)
and after each scheduler.step(), in float64, exactly as torch produces them
by calling step() repeatedly (the chainable, recursive forms of StepLR and
CosineAnnealingLR; OneCycleLR's closed form). A case that steps past what
torch allows records the error message and the call that raised it.

LambdaLR's factor is lam(opts) below (core/lr_scheduler_test.go computes the
same); ReduceLROnPlateau steps with each of a case's metrics in turn;
SequentialLR's schedulers are made in order before it, as a script would.
"""
import json
import os
import sys

import torch

CASES = [
    # name, scheduler kind, optimizer lr, gglua options, torch constructor, steps
    ("step_2_0.5", "step", 0.1, {"step_size": 2, "gamma": 0.5},
     lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5), 12),
    ("step_3_0.1", "step", 0.3, {"step_size": 3, "gamma": 0.1},
     lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.1), 14),
    ("cosine_4", "cosine", 1.0, {"t_max": 4, "eta_min": 0},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0), 20),
    ("cosine_10_min", "cosine", 0.1, {"t_max": 10, "eta_min": 0.001},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 45),
    ("cosine_1", "cosine", 0.5, {"t_max": 1, "eta_min": 0.1},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=1, eta_min=0.1), 6),
    ("one_cycle_10", "one_cycle", 0.123, {"max_lr": 1, "total": 10, "pct_start": 0.3, "div_factor": 25, "final_div_factor": 1e4},
     lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1, total_steps=10, pct_start=0.3, div_factor=25,
                                                   final_div_factor=1e4, cycle_momentum=False), 13),
    ("one_cycle_100", "one_cycle", 0.5, {"max_lr": 0.01, "total": 100, "pct_start": 0.25, "div_factor": 10, "final_div_factor": 100},
     lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.01, total_steps=100, pct_start=0.25, div_factor=10,
                                                   final_div_factor=100, cycle_momentum=False), 102),
    ("one_cycle_early_peak", "one_cycle", 0.5, {"max_lr": 2, "total": 10, "pct_start": 0.05, "div_factor": 25, "final_div_factor": 1e4},
     lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=2, total_steps=10, pct_start=0.05, div_factor=25,
                                                   final_div_factor=1e4, cycle_momentum=False), 11),
    ("multi_step", "multi_step", 0.2, {"milestone.1": 2, "milestone.2": 5, "milestone.3": 5, "gamma": 0.5},
     lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.5), 9),
    ("exponential_0.9", "exponential", 0.5, {"gamma": 0.9},
     lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9), 10),
    ("linear_default", "linear", 0.1, {"start_factor": 1 / 3, "end_factor": 1.0, "total_iters": 5},
     lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=1 / 3, end_factor=1.0, total_iters=5), 9),
    ("linear_down", "linear", 1.0, {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 4},
     lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=4), 7),
    ("cosine_restarts_3", "cosine_restarts", 0.1, {"t_0": 3, "t_mult": 1, "eta_min": 0.001},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=1, eta_min=0.001), 10),
    ("cosine_restarts_2x", "cosine_restarts", 1.0, {"t_0": 2, "t_mult": 2, "eta_min": 0},
     lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0), 16),
]


def lam(o):
    return lambda e: o["a"] ** e * min(1.0, (e + 1) / o["warm"]) + o["b"] * e


S = torch.optim.lr_scheduler

MORE = [
    ("lambda_pow", "lambda", 0.1, {"a": 0.95, "warm": 1, "b": 0}, 10),
    ("lambda_warm_linear", "lambda", 0.5, {"a": 1, "warm": 4, "b": -0.05}, 12),
]

PLATEAU = [
    # name, lr, options (numbers), texts, metrics
    ("plateau_default", 0.1, {"factor": 0.1, "patience": 10, "threshold": 1e-4, "cooldown": 0, "min_lr": 0, "eps": 1e-8},
     {"mode": "min", "threshold_mode": "rel"}, [1.0] + [0.99995] * 14 + [0.5] + [0.6] * 12),
    ("plateau_patience_cooldown", 1.0, {"factor": 0.5, "patience": 2, "threshold": 0.01, "cooldown": 2, "min_lr": 0.2, "eps": 1e-8},
     {"mode": "min", "threshold_mode": "abs"}, [3, 2, 1.995, 1.99, 2.5, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, float("nan"), 0.1]),
    ("plateau_max_rel", 0.3, {"factor": 0.1, "patience": 1, "threshold": 0.1, "cooldown": 0, "min_lr": 0, "eps": 1e-3},
     {"mode": "max", "threshold_mode": "rel"}, [-1, -0.5, 1, 1.05, 1.2, 1.2, 1.2, 5, 5, 5, 5, 5, 5, 5]),
    ("plateau_max_abs", 0.3, {"factor": 0.25, "patience": 0, "threshold": 0.5, "cooldown": 1, "min_lr": 0, "eps": 1e-8},
     {"mode": "max", "threshold_mode": "abs"}, [0, 1, 1.2, 2, 2.4, 2.6, 3.2, 3.2, 3.2, 3.2]),
]

SEQUENTIAL = [
    # name, lr, [(kind, options)], milestones, steps
    ("sequential_warmup_exp", 1.0, [("linear", {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 3}),
                                    ("exponential", {"gamma": 0.9})], [3], 10),
    ("sequential_three", 0.2, [("step", {"step_size": 2, "gamma": 0.5}),
                               ("cosine", {"t_max": 4, "eta_min": 0.01}),
                               ("lambda", {"a": 0.8, "warm": 1, "b": 0})], [3, 7], 14),
    ("sequential_one_cycle_later", 0.1, [("linear", {"start_factor": 0.5, "end_factor": 1.0, "total_iters": 2}),
                                         ("one_cycle", {"max_lr": 1, "total": 10, "pct_start": 0.3, "div_factor": 25,
                                                        "final_div_factor": 1e4})], [3], 8),
    ("sequential_restart_linear", 0.5, [("exponential", {"gamma": 0.5}),
                                        ("linear", {"start_factor": 0.5, "end_factor": 1.0, "total_iters": 2}),
                                        ("multi_step", {"milestone.1": 1, "milestone.2": 3, "gamma": 0.1})], [2, 4], 9),
]


def make_torch(o, kind, opts):
    if kind == "linear":
        return S.LinearLR(o, start_factor=opts["start_factor"], end_factor=opts["end_factor"], total_iters=opts["total_iters"])
    if kind == "exponential":
        return S.ExponentialLR(o, gamma=opts["gamma"])
    if kind == "step":
        return S.StepLR(o, step_size=opts["step_size"], gamma=opts["gamma"])
    if kind == "cosine":
        return S.CosineAnnealingLR(o, T_max=opts["t_max"], eta_min=opts["eta_min"])
    if kind == "lambda":
        return S.LambdaLR(o, lam(opts))
    if kind == "one_cycle":
        return S.OneCycleLR(o, max_lr=opts["max_lr"], total_steps=opts["total"], pct_start=opts["pct_start"],
                            div_factor=opts["div_factor"], final_div_factor=opts["final_div_factor"], cycle_momentum=False)
    if kind == "multi_step":
        ms = [opts[k] for k in sorted(k for k in opts if k.startswith("milestone."))]
        return S.MultiStepLR(o, milestones=ms, gamma=opts["gamma"])
    raise ValueError(kind)


def run(lr, make, steps):
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=lr)
    sched = make(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for i in range(steps):
        opt.step()  # keeps torch from warning that step() came first
        try:
            sched.step()
        except ValueError as e:
            return lrs, {"call": i + 1, "message": str(e)}
        lrs.append(opt.param_groups[0]["lr"])
    return lrs, None


def main():
    out = {"torch": torch.__version__, "cases": []}
    for name, kind, lr, opts, make, steps in CASES:
        lrs, err = run(lr, make, steps)
        case = {"name": name, "kind": kind, "lr": lr, "opts": opts, "lrs": lrs}
        if err:
            case["error"] = err
        out["cases"].append(case)
    for name, kind, lr, opts, steps in MORE:
        lrs, _ = run(lr, lambda o: make_torch(o, kind, opts), steps)
        out["cases"].append({"name": name, "kind": kind, "lr": lr, "opts": opts, "lrs": lrs})
    for name, lr, opts, texts, metrics in PLATEAU:
        p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        opt = torch.optim.SGD([p], lr=lr)
        sched = S.ReduceLROnPlateau(opt, **opts, **texts)
        lrs = [opt.param_groups[0]["lr"]]
        for m in metrics:
            opt.step()
            sched.step(m)
            lrs.append(opt.param_groups[0]["lr"])
        out["cases"].append({"name": name, "kind": "plateau", "lr": lr, "opts": opts, "texts": texts,
                             "metrics": [str(m) for m in metrics], "lrs": lrs})
    for name, lr, subs, milestones, steps in SEQUENTIAL:
        def make(o):
            return S.SequentialLR(o, [make_torch(o, k, so) for k, so in subs], milestones=milestones)
        lrs, _ = run(lr, make, steps)
        out["cases"].append({"name": name, "kind": "sequential", "lr": lr, "lrs": lrs, "milestones": milestones,
                             "subs": [{"kind": k, "opts": so} for k, so in subs]})
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "core", "testdata", "lr_schedulers.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
