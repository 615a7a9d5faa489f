"""An independent writer and reader of Hugging Face's safetensors format, for
core/safetensors_test.go. PyTorch 1.13 here has no safetensors package, so
the format is written from its spec with struct + json + torch's own bytes:
8 bytes of little-endian header length, the JSON header ({name: {dtype,
shape, data_offsets}}, "__metadata__": {str: str}), then the packed data.

  /usr/bin/python3 scripts/reference/safetensors_ref.py write
      writes core/testdata/safetensors_ref.safetensors and, as the values
      every tensor must load as, core/testdata/safetensors_ref.json
  /usr/bin/python3 scripts/reference/safetensors_ref.py read FILE OUT.json
      reads a file gglua wrote (core/testdata/gglua_written.safetensors) and
      writes what it holds to OUT.json (core/testdata/gglua_written.json)

Values are compared exactly, so the JSON holds each float's f32 bit pattern
(every F32/F16/BF16 value is an exact f32) and each integer as itself."""
import json
import math
import struct
import sys

import torch

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32", torch.int64: "I64"}
BY_NAME = {v: k for k, v in DTYPES.items()}
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8}


def f32_bits(t):
    """The f32 bit patterns of t's values, as unsigned ints."""
    return [b & 0xFFFFFFFF for b in t.float().reshape(-1).view(torch.int32).tolist()]


def describe(tensors, metadata):
    out = {}
    for name, t in sorted(tensors.items()):
        e = {"dtype": DTYPES[t.dtype], "shape": list(t.shape)}
        if t.is_floating_point():
            e["bits"] = f32_bits(t)
        else:
            e["ints"] = t.reshape(-1).tolist()
        out[name] = e
    return {"metadata": metadata, "tensors": out}


def reference_tensors():
    inf, nan = math.inf, math.nan
    f32 = torch.tensor(
        [[0.0, -0.0, 1 / 3, 1e-45], [3.4028234663852886e38, inf, -inf, nan], [math.pi, -1e-20, 123456.789, 2.0**-126]],
        dtype=torch.float32,
    )
    f16 = torch.tensor([1.0, -2.5, 65504.0, 5.960464477539063e-08, -inf], dtype=torch.float16)
    bf16 = torch.tensor([[1.0, -3.140625], [1.0e38, 9.183549615799121e-41]], dtype=torch.bfloat16)
    return {
        # Written in this order (not sorted by name, as gglua writes), so the
        # reader cannot lean on an order.
        "model.layers.0.norm.weight": f16,
        "model.embed.weight": f32,
        "model.layers.0.proj.bias": bf16,
        "counts": torch.tensor([0, -7, 16777217, -(2**31), 2**31 - 1], dtype=torch.int32),
        "position_ids": torch.tensor([[0, 1, 2, 3, 2**31 - 1]], dtype=torch.int64),
        "scale": torch.tensor(0.125, dtype=torch.float32),
        "lm_head.weight": torch.arange(6, dtype=torch.float32).reshape(2, 1, 1, 3) / 4,
    }


def write(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dim() else t.reshape(1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys in the header"
    return dict(pairs)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"), object_pairs_hook=no_duplicates)
    body = data[8 + n :]
    metadata = header.pop("__metadata__", {})
    spans = sorted((e["data_offsets"][0], e["data_offsets"][1], name) for name, e in header.items())
    end = 0
    for begin, stop, name in spans:
        assert begin == end, f"{name}: gap or overlap"
        end = stop
    assert end == len(body), "data length"
    tensors = {}
    for name, e in header.items():
        begin, stop = e["data_offsets"]
        count = math.prod(e["shape"])
        assert stop - begin == count * SIZES[e["dtype"]], name
        raw = bytearray(body[begin:stop])
        tensors[name] = torch.frombuffer(raw, dtype=BY_NAME[e["dtype"]], count=count).reshape(e["shape"])
    return tensors, metadata


def main():
    if sys.argv[1] == "write":
        tensors = reference_tensors()
        metadata = {"format": "pt", "note": "written by safetensors_ref.py, café"}
        write("core/testdata/safetensors_ref.safetensors", tensors, metadata)
        back, meta = read("core/testdata/safetensors_ref.safetensors")
        assert describe(back, meta) == describe(tensors, metadata)
        out = describe(tensors, metadata)
        path = "core/testdata/safetensors_ref.json"
    else:
        tensors, metadata = read(sys.argv[2])
        out = describe(tensors, metadata)
        path = sys.argv[3]
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
