"""Reference values for nn.scaled_dot_product_attention and
nn.MultiheadAttention (tests/attention_test.go), from PyTorch 1.13:

    /usr/bin/python3 scripts/reference/attention.py > core/testdata/torch_attention.json

torch 1.13 has no F.scaled_dot_product_attention: its reference is the
definition, softmax(q kᵀ·scale + bias, masked) v, in float64. Masks are
written as gglua takes them: for sdpa 1 = attend; for MultiheadAttention
1 = may not attend (PyTorch's True for that module).
"""
import json
import math

import torch

torch.manual_seed(11)


def t(x):
    return {"shape": list(x.shape), "values": x.detach().flatten().tolist()}


def sdpa(q, k, v, mask=None, bias=None, causal=False):
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    allowed = torch.ones(s.shape[-2:], dtype=torch.bool)
    if causal:
        allowed = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
    if mask is not None:
        allowed = allowed & mask.bool()
    s = s.masked_fill(~allowed, float("-inf"))
    return s.softmax(-1) @ v


cases = []
for name, qs, ks, vs, use_mask, use_bias, causal in [
    ("plain", [2, 2, 3, 4], [2, 2, 5, 4], [2, 2, 5, 3], False, False, False),
    ("mask", [2, 2, 3, 4], [2, 2, 5, 4], [2, 2, 5, 3], True, False, False),
    ("bias", [1, 3, 4], [1, 6, 4], [1, 6, 2], False, True, False),
    ("causal", [1, 2, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8], False, False, True),
    ("causal and mask", [2, 4, 4], [2, 4, 4], [2, 4, 4], True, False, True),
]:
    q = torch.randn(qs, dtype=torch.float64, requires_grad=True)
    k = torch.randn(ks, dtype=torch.float64, requires_grad=True)
    v = torch.randn(vs, dtype=torch.float64, requires_grad=True)
    mask = bias = None
    if use_mask:
        mask = (torch.rand(qs[-2], ks[-2]) > 0.4).double()
        mask[:, 0] = 1  # every query attends to a key
    if use_bias:
        bias = torch.randn(qs[-2], ks[-2], dtype=torch.float64)
    out = sdpa(q, k, v, mask, bias, causal)
    w = torch.randn(out.shape, dtype=torch.float64)
    (out * w).sum().backward()
    c = {"name": name, "q": t(q), "k": t(k), "v": t(v), "causal": causal, "out": t(out), "w": t(w),
         "grad_q": t(q.grad), "grad_k": t(k.grad), "grad_v": t(v.grad)}
    if mask is not None:
        c["mask"] = t(mask)
    if bias is not None:
        c["bias"] = t(bias)
    cases.append(c)

mha_cases = []
for name, batch_first, use_masks in [("seq first", False, False), ("batch first, masks", True, True)]:
    m = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first).double()
    L, S, N = 3, 4, 2
    shape_q = [N, L, 8] if batch_first else [L, N, 8]
    shape_k = [N, S, 8] if batch_first else [S, N, 8]
    query = torch.randn(shape_q, dtype=torch.float64, requires_grad=True)
    key = torch.randn(shape_k, dtype=torch.float64, requires_grad=True)
    value = torch.randn(shape_k, dtype=torch.float64)
    kw = {}
    if use_masks:
        kw["key_padding_mask"] = torch.tensor([[False, False, False, True], [False, True, False, False]])
        kw["attn_mask"] = torch.tensor([[False, True, False, False], [False, False, False, False], [True, False, False, False]])
    out, weights = m(query, key, value, **kw)
    w = torch.randn(out.shape, dtype=torch.float64)
    (out * w).sum().backward()
    c = {"name": name, "batch_first": batch_first,
         "params": {n: t(p) for n, p in m.named_parameters()},
         "query": t(query), "key": t(key), "value": t(value), "out": t(out), "weights": t(weights), "w": t(w),
         "grad_query": t(query.grad), "grad_key": t(key.grad),
         "grad_in_proj_weight": t(m.in_proj_weight.grad), "grad_out_proj_bias": t(m.out_proj.bias.grad)}
    for n, mk in kw.items():
        c[n] = t(mk.double())
    mha_cases.append(c)

json.dump({"sdpa": cases, "mha": mha_cases}, open(1, "w"))
