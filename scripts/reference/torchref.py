"""What the PyTorch reference scripts share: the JSON encoding of numbers
(NaN and the infinities as the strings "nan", "inf", "-inf") and tensors,
the fixed cotangent each case's gradients are taken against, and the
optimizer runs' data, settings, schedulers and saved groups."""
import json
import math
import os

import torch


def enc(v):
    if isinstance(v, (list, tuple)):
        return [enc(x) for x in v]
    if v is None:
        return None
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def tensor_json(t):
    """A tensor as {"shape", "values"}; a bool tensor's values as 0/1."""
    return {"shape": list(t.shape), "values": enc(t.detach().float().reshape(-1).tolist())}


def cotangent(shape):
    """Fixed, away from 0, both signs."""
    n = 1
    for s in shape:
        n *= s
    v = [(0.5 + ((i * 7919) % 13) / 13.0) * (1 if i % 3 else -1) for i in range(n)]
    return torch.tensor(v, dtype=torch.float32).reshape(shape)


def make_case(name, op, f, inputs, grads=None, args=None, flags=False):
    """One case of an op: inputs (lists or tensors) as float32 tensors,
    grads[i] saying whether input i requires grad (default all), the output
    of f (a bool output made 0/1), and each input's gradient of
    sum(output * cotangent) (None where it needs none, or where the output
    does not require grad). flags adds which inputs and whether the output
    required grad. It returns the case, for the script to add to."""
    ts = []
    for i, x in enumerate(inputs):
        t = x.clone().float() if torch.is_tensor(x) else torch.tensor(x, dtype=torch.float32)
        t.requires_grad_(grads is None or grads[i])
        ts.append(t)
    out = f(*ts)
    out_rg = out.requires_grad
    if out.dtype == torch.bool:
        out = out.float()
    cot = cotangent(out.shape)
    ins = [t for t in ts if t.requires_grad] if out_rg else []
    gs = torch.autograd.grad((out * cot).sum(), ins, allow_unused=True) if ins else []
    gi = iter(gs)
    grad_json = []
    for t in ts:
        if out_rg and t.requires_grad:
            g = next(gi)
            grad_json.append(tensor_json(g if g is not None else torch.zeros_like(t)))
        else:
            grad_json.append(None)
    c = {"name": name, "op": op, "args": dict(args or {}), "inputs": [tensor_json(t) for t in ts]}
    if flags:
        c["requires_grad"] = [t.requires_grad for t in ts]
        c["output_requires_grad"] = out_rg
    c.update({"output": tensor_json(out), "cotangent": tensor_json(cot), "grads": grad_json})
    return c


def optim_fixture():
    """The optimizer runs' data (losses.py's "optim" section, optim_groups.py,
    optim_add_group.py): weight w [3, 2], bias b [2] (both requiring grad)
    and input x [4, 3] from seed 5, with copies of w and b as they start."""
    torch.manual_seed(5)
    w = torch.randn(3, 2)
    b = torch.randn(2)
    x = torch.randn(4, 3)
    w0, b0 = w.clone(), b.clone()
    w.requires_grad_(True)
    b.requires_grad_(True)
    return w, b, x, w0, b0


def torch_settings(d):
    """Optimizer settings from JSON for torch: betas as a tuple."""
    d = dict(d)
    if "betas" in d:
        d["betas"] = tuple(d["betas"])
    return d


def scheduler(opt, sched):
    """A StepLR or CosineAnnealingLR from its JSON description (None: none)."""
    if not sched:
        return None
    if sched["kind"] == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=sched["step_size"], gamma=sched["gamma"])
    return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=sched["t_max"], eta_min=sched["eta_min"])


GROUP_KEYS = ["lr", "initial_lr", "momentum", "dampening", "weight_decay", "nesterov", "betas", "eps"]


def param_groups_json(opt):
    """The state_dict's param_groups: the settings gglua keeps, and the
    parameters 1-based."""
    saved = opt.state_dict()["param_groups"]
    out = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items() if k in GROUP_KEYS} for g in saved]
    for g, sg in zip(out, saved):
        g["params"] = [i + 1 for i in sg["params"]]
    return out


def write_cases(name, script, cases, **sections):
    """Writes core/testdata/<name>: {"torch", "script", "cases", then any
    further sections}, a case a line; returns the path."""
    path = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "core", "testdata", name))
    parts = [("cases", cases)] + list(sections.items())
    with open(path, "w") as f:
        f.write('{"torch": %s, "script": %s' % (json.dumps(torch.__version__), json.dumps(script)))
        for key, items in parts:
            f.write(', "%s": [\n' % key)
            f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in items))
            f.write("\n]")
        f.write("}\n")
    return path
