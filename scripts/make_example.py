#!/usr/bin/env python3
"""Writes the example model scripts/run.sh mounts: a small, deterministic
safetensors file (F16 embedding, BF16 and F32 layer weights, an I64 scalar,
metadata), written here with the standard library only, so the project
never depends on anyone else's file or on numpy.

usage: make_example.py OUTPUT
"""
import json
import math
import struct
import sys


def f16(values):
    return b"".join(struct.pack("<e", v) for v in values)


def bf16(values):
    # bfloat16 is the top half of an IEEE float32 (truncated).
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    vocab, hidden = 1000, 64
    tensors = [
        ("embedding", "F16", [vocab, hidden],
         f16(math.sin(0.01 * i) for i in range(vocab * hidden))),
        ("layers.0.attention.wq", "BF16", [hidden, hidden],
         bf16(math.cos(0.02 * i) / 8 for i in range(hidden * hidden))),
        ("layers.0.norm.weight", "F32", [hidden], f32([1.0 + i / 100 for i in range(hidden)])),
        ("lm_head/bias", "F32", [vocab], f32([-(i % 7) / 7 for i in range(vocab)])),
        ("step", "I64", [], struct.pack("<q", 1234)),
    ]
    header = {"__metadata__": {"format": "pt", "written_by": "stfs scripts/make_example.py"}}
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(sys.argv[1], "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    main()
