"""PyTorch models' state_dicts across gglua and PyTorch, for
tests/state_dict_test.go: a Linear, BatchNorm1d, ReLU, Linear stack, and
(write-lm / read-lm) a small language model of an Embedding, a ModuleList
of two Linears and a head whose weight is the embedding's (tied: listed
under both names, as PyTorch's state_dict lists it).

  /usr/bin/python3 scripts/reference/state_dict.py write
      trains the model's BatchNorm for two batches, writes its state_dict to
      core/testdata/torch_state_dict.safetensors (num_batches_tracked an
      int64 scalar, as PyTorch keeps it) and core/testdata/torch_state_dict.json:
      the input, the eval-mode output, and after one more training batch the
      output, running statistics and count
  /usr/bin/python3 scripts/reference/state_dict.py read FILE OUT.json
      loads a state_dict gglua wrote (core/testdata/gglua_state_dict.safetensors)
      with strict=True and writes its eval-mode output and count to OUT.json
      (core/testdata/gglua_state_dict.json)
  /usr/bin/python3 scripts/reference/state_dict.py write-lm
  /usr/bin/python3 scripts/reference/state_dict.py read-lm FILE OUT.json
      the same for the language model: core/testdata/torch_lm_state_dict.*
      (the token ids 0-based there; gglua's are those + 1), and what PyTorch
      computes from gglua's file (core/testdata/gglua_lm_state_dict.*)

The safetensors files are written and read by safetensors_ref.py's
functions (PyTorch 1.13 has no safetensors package)."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_ref import read, write  # noqa: E402


def model():
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = torch.tanh(b(x))
        return self.head(x)


LM_TOKENS = [[3, 0, 9, 4], [7, 7, 1, 2]]


def lm(mode):
    if mode == "write-lm":
        torch.manual_seed(1)
        m = LM()
        sd = {k: v.detach().clone() for k, v in m.state_dict().items()}
        write("core/testdata/torch_lm_state_dict.safetensors", sd, {"format": "pt"})
        with torch.no_grad():
            out = {"tokens": LM_TOKENS, "output": values(m(torch.tensor(LM_TOKENS))), "keys": sorted(sd.keys())}
        with open("core/testdata/torch_lm_state_dict.json", "w") as f:
            json.dump(out, f, indent=1)
        return
    tensors, _ = read(sys.argv[2])
    m = LM()
    m.load_state_dict(tensors, strict=True)
    with torch.no_grad():
        out = {"output": values(m(torch.tensor(LM_TOKENS))), "keys": sorted(tensors.keys()),
               "tied": m.head.weight is m.emb.weight}
    with open(sys.argv[3], "w") as f:
        json.dump(out, f, indent=1)


def batches():
    g = torch.Generator().manual_seed(7)
    return [torch.randn(5, 3, generator=g) * 2 + 1 for _ in range(3)]


def values(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def main():
    if sys.argv[1] in ("write-lm", "read-lm"):
        lm(sys.argv[1])
    elif sys.argv[1] == "write":
        torch.manual_seed(0)
        m = model()
        xs = batches()
        with torch.no_grad():
            m.train()
            m(xs[0])
            m(xs[1])
            sd = {k: v.clone() for k, v in m.state_dict().items()}
            write("core/testdata/torch_state_dict.safetensors", sd, {"format": "pt"})
            m.eval()
            out = {"input": values(xs[2]), "eval_output": values(m(xs[2]))}
            m.train()
            out["train_output"] = values(m(xs[2]))
            out["running_mean"] = values(m[1].running_mean)
            out["running_var"] = values(m[1].running_var)
            out["num_batches_tracked"] = int(m[1].num_batches_tracked)
        with open("core/testdata/torch_state_dict.json", "w") as f:
            json.dump(out, f, indent=1)
    else:
        tensors, _ = read(sys.argv[2])
        m = model()
        m.load_state_dict(tensors, strict=True)
        x = torch.tensor(json.load(open("core/testdata/torch_state_dict.json"))["input"]).reshape(5, 3)
        m.eval()
        with torch.no_grad():
            out = {"eval_output": values(m(x)), "num_batches_tracked": int(m[1].num_batches_tracked),
                   "keys": sorted(tensors.keys())}
        with open(sys.argv[3], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
