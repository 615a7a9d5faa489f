"""A PyTorch model's state_dict across gglua and PyTorch, for
tests/state_dict_test.go: a Linear, BatchNorm1d, ReLU, Linear stack.

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


def batches():
    g = torch.Generator().manual_seed(7)
    return [torch.randn(5, 3, generator=g) * 2 + 1 for _ in range(3)]


def values(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def main():
    if sys.argv[1] == "write":
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
