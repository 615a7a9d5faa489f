#!/usr/bin/env python3
"""Writes PyTorch's values for gglua's einsum (issue 38).

Run by hand where PyTorch is installed (written against torch 1.13):

    python3 scripts/reference/einsum.py

It writes core/testdata/torch_einsum.json in the format of torch_conv.json
(see conv.py: inputs, output, cotangent, gradients); args.eq is the
equation. core/ops_einsum_test.go reads it. A 0-d result is written with
shape [1], as gglua gives it.
"""
import torch

from torchref import make_case, write_cases

torch.manual_seed(38)
cases = []


def case(eq, *shapes):
    inputs = [torch.randn(*s) for s in shapes]

    def f(*t):
        y = torch.einsum(eq, *t)
        return y.reshape(1) if y.dim() == 0 else y
    cases.append(make_case(eq, "einsum", f, inputs, args={"eq": eq}))


case("ij,jk->ik", (2, 3), (3, 4))
case("bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4))
case("bhqk,bhkd->bhqd", (2, 3, 4, 5), (2, 3, 5, 2))
case("i,j->ij", (3,), (4,))
case("ij->ji", (2, 3))
case("ij,ij->", (2, 3), (2, 3))
case("bi,bi->b", (4, 3), (4, 3))
case("ij,jk,kl->il", (2, 3), (3, 4), (4, 2))
case("ij,jk", (3, 2), (2, 4))
case("ijk->j", (2, 3, 4))
case("bij,bjk->bik", (3, 2, 4), (3, 4, 2))
case("Ab,bc", (2, 3), (3, 2))
case("i,i", (5,), (5,))
case("ij,kj->ik", (3, 4), (2, 4))
case("i j , j -> i", (3, 4), (4,))
case("bn,anm,bm->ba", (2, 3), (4, 3, 5), (2, 5))
case("ij,jk->ik", (2, 1), (3, 4))
case("ij,ij->ij", (2, 1), (2, 3))

print("wrote", write_cases("torch_einsum.json", "scripts/reference/einsum.py", cases))
