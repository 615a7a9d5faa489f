#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's recurrent layers and nn.init bounds
(issue 12).

Run by hand where PyTorch is installed (written against torch 1.13):

    /usr/bin/python3 scripts/reference/rnn.py

It writes core/testdata/torch_rnn.json:

- "cases": each builds one torch.nn module (RNN, GRU, LSTM or a cell) from
  its class name and options, with PyTorch's own seeded initial weights,
  exported as "params" ({name, shape, values}, in named_parameters order).
  The input (and an initial state where given) are float32 tensors; the
  loss is sum(output * cotangent) + sum(h_n) (+ sum(c_n)); the file holds
  the output, h_n (and c_n) and the gradients of that loss with respect to
  the input, the initial state and every parameter. Options use gglua's
  names, which are PyTorch's; shapes are PyTorch's (gglua's are the same,
  dims only count from 1). The Go test (tests/rnn_test.go) loads the
  parameters with load_state_dict, runs gglua's module and compares.
- "init": for nn.init's uniform/normal initialisers, a weight shape, the
  options, and the bound (uniform) or std (normal) that PyTorch's formulas
  give (from torch.nn.init's calculate_gain and fan computation), checked
  here against a large PyTorch sample.
"""
import json
import math
import os

import torch

torch.manual_seed(12)


def tensor_json(t):
    return {"shape": list(t.shape), "values": [float(v) for v in t.detach().float().reshape(-1).tolist()]}


def cotangent(shape):
    n = 1
    for s in shape:
        n *= s
    v = [(0.5 + ((i * 7919) % 13) / 13.0) * (1 if i % 3 else -1) for i in range(n)]
    return torch.tensor(v, dtype=torch.float32).reshape(shape)


cases = []


def case(name, cls, args, opts, input_shape, state=None):
    """state: None, "h" (h0) or "hc" (h0, c0): an initial state given."""
    kw = dict(opts)
    mod = getattr(torch.nn, cls)(*args, **kw)
    x = torch.randn(*input_shape, requires_grad=True)
    cell = cls.endswith("Cell")
    unbatched = x.dim() == (1 if cell else 2)
    hidden = args[1]
    if cell:
        hshape = [hidden] if unbatched else [input_shape[0], hidden]
        cshape = hshape
    else:
        rows = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
        batch = None if unbatched else input_shape[0 if kw.get("batch_first") else 1]
        cshape = [rows, hidden] if unbatched else [rows, batch, hidden]
        # with proj_size, an LSTM's h has proj_size features, its c hidden
        hshape = cshape[:-1] + [kw.get("proj_size") or hidden]
    h0 = c0 = None
    if state:
        h0 = (torch.randn(*hshape) * 0.5).requires_grad_(True)
        if state == "hc":
            c0 = (torch.randn(*cshape) * 0.5).requires_grad_(True)
    hx = None if h0 is None else ((h0, c0) if c0 is not None else h0)
    if cell:
        res = mod(x, hx)
        if cls == "LSTMCell":
            out, (h_n, c_n) = res[0], res
        else:
            out, h_n, c_n = res, res, None
    else:
        out, hn = mod(x, hx)
        h_n, c_n = (hn if cls == "LSTM" else (hn, None))
    cot = cotangent(list(out.shape))
    if cell:
        # a cell's output is its new state: the loss is sum(h' * cot) (+ sum(c')).
        loss = (out * cot).sum() + (c_n.sum() if c_n is not None else 0)
    else:
        loss = (out * cot).sum() + h_n.sum() + (c_n.sum() if c_n is not None else 0)
    loss.backward()
    grads = {"input": tensor_json(x.grad)}
    if h0 is not None:
        grads["h0"] = tensor_json(h0.grad)
    if c0 is not None:
        grads["c0"] = tensor_json(c0.grad)
    params = []
    for n, p in mod.named_parameters():
        params.append(dict(name=n, **tensor_json(p)))
        grads[n] = tensor_json(p.grad)
    c = {
        "name": name, "class": cls, "args": list(args), "opts": kw,
        "params": params, "input": tensor_json(x),
        "h0": None if h0 is None else tensor_json(h0),
        "c0": None if c0 is None else tensor_json(c0),
        "cotangent": tensor_json(cot),
        "output": tensor_json(out), "h_n": tensor_json(h_n),
        "c_n": None if c_n is None else tensor_json(c_n),
        "loss": float(loss), "grads": grads,
    }
    cases.append(c)


case("rnn_tanh", "RNN", [3, 4], {}, [5, 2, 3])
case("rnn_relu_h0", "RNN", [3, 4], {"nonlinearity": "relu"}, [4, 2, 3], "h")
case("rnn_2layer_batch_first_nobias", "RNN", [3, 5], {"num_layers": 2, "batch_first": True, "bias": False}, [2, 4, 3], "h")
case("rnn_bidirectional", "RNN", [2, 3], {"bidirectional": True}, [4, 2, 2])
case("gru", "GRU", [3, 4], {}, [5, 2, 3], "h")
case("gru_2layer_batch_first", "GRU", [3, 4], {"num_layers": 2, "batch_first": True}, [3, 4, 3])
case("gru_unbatched", "GRU", [3, 4], {}, [4, 3], "h")
case("lstm", "LSTM", [3, 4], {}, [5, 2, 3], "hc")
case("lstm_2layer_bidirectional_batch_first", "LSTM", [3, 4], {"num_layers": 2, "bidirectional": True, "batch_first": True}, [2, 4, 3], "hc")
case("lstm_nobias_zero_state", "LSTM", [2, 3], {"bias": False}, [4, 3, 2])
case("rnncell", "RNNCell", [3, 4], {}, [2, 3], "h")
case("rnncell_relu_unbatched", "RNNCell", [3, 4], {"nonlinearity": "relu"}, [3], "h")
case("grucell", "GRUCell", [3, 4], {}, [2, 3], "h")
case("lstmcell", "LSTMCell", [3, 4], {}, [2, 3], "hc")
case("lstmcell_nobias_zero_state", "LSTMCell", [3, 4], {"bias": False}, [2, 3])
# proj_size: h (output, h0, h_n) has proj_size features, c hidden_size;
# weight_hr_l{k} [proj_size, hidden] after each layer's biases.
case("lstm_proj", "LSTM", [3, 5], {"proj_size": 2}, [4, 2, 3], "hc")
case("lstm_proj_2layer_bidirectional_batch_first", "LSTM", [3, 4],
     {"num_layers": 2, "bidirectional": True, "batch_first": True, "proj_size": 3}, [2, 3, 3], "hc")
case("lstm_proj_unbatched_nobias_zero_state", "LSTM", [2, 4], {"proj_size": 1, "bias": False}, [3, 2])

# nn.init: PyTorch's bound (uniform) or std (normal) for each initialiser.
inits = []


def init_case(fn, shape, opts):
    w = torch.empty(*shape)
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(w)
    if fn.startswith("xavier"):
        std = opts.get("gain", 1.0) * math.sqrt(2.0 / (fan_in + fan_out))
    else:
        a = opts.get("a", 0)
        fan = fan_in if opts.get("mode", "fan_in") == "fan_in" else fan_out
        gain = torch.nn.init.calculate_gain(opts.get("nonlinearity", "leaky_relu"), a)
        std = gain / math.sqrt(fan)
    uniform = fn.endswith("uniform_")
    value = math.sqrt(3.0) * std if uniform else std
    # Check the formula against PyTorch's own initialiser on a big sample.
    big = torch.empty(*shape)
    getattr(torch.nn.init, fn)(big, **opts)
    if uniform:
        assert big.abs().max() <= value * (1 + 1e-6) and big.abs().max() >= value * 0.9, (fn, shape, opts)
    else:
        assert abs(big.std().item() / value - 1) < 0.1, (fn, shape, opts, big.std().item(), value)
    inits.append({"fn": fn, "shape": list(shape), "opts": opts, "bound" if uniform else "std": value})


init_case("xavier_uniform_", [64, 128], {})
init_case("xavier_uniform_", [32, 16, 3, 3], {"gain": 5.0 / 3.0})
init_case("xavier_normal_", [128, 64], {"gain": 2.0})
init_case("kaiming_uniform_", [64, 128], {})
init_case("kaiming_uniform_", [64, 128], {"a": math.sqrt(5)})
init_case("kaiming_uniform_", [16, 8, 5, 5], {"mode": "fan_out", "nonlinearity": "relu"})
init_case("kaiming_normal_", [128, 256], {"nonlinearity": "relu"})
init_case("kaiming_normal_", [64, 32], {"a": 0.2, "mode": "fan_out"})
init_case("kaiming_normal_", [64, 32], {"nonlinearity": "tanh"})
init_case("kaiming_uniform_", [64, 32], {"nonlinearity": "selu"})

out = os.path.join(os.path.dirname(__file__), "..", "..", "core", "testdata", "torch_rnn.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases, "init": inits}, f, indent=1)
    f.write("\n")
print("wrote", os.path.normpath(out), len(cases), "cases,", len(inits), "init cases")
