"""What the PyTorch reference scripts share: the JSON encoding of numbers
(NaN and the infinities as the strings "nan", "inf", "-inf") and tensors,
and the fixed cotangent each case's gradients are taken against."""
import math

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
