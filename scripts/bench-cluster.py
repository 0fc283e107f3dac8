#!/usr/bin/env python3
"""The model, the readers and the byte check of scripts/bench-cluster.sh.

  bench-cluster.py generate DIR BYTES   writes an 8-shard checkpoint of about
      BYTES into DIR in s3rver's own store layout (KEY._S3rver_object plus its
      .md5, so s3rver serves it without an upload copying it); prints the
      bytes of tensor data
  bench-cluster.py read DIR MNT NODE NODES DIM    (DIM 0, 1 or "whole")
      reads, through the mount MNT, what node NODE of NODES reads: its ranks
      (NODE*8/NODES ...) of parts/8/R[@DIM] of every 2-D tensor and the whole
      of every 1-D one ("whole": every tensor's data); prints the bytes read
  bench-cluster.py size DIR NODE NODES DIM
      the bytes that `read` should read (from the headers alone)
  bench-cluster.py verify DIR MNT NODE NODES DIM
      the same files again, each compared with numpy's slice of the tensor
      taken from the shard files in DIR; prints "ok BYTES" or the mismatches
      and exits 1

The reference parses the safetensors headers itself and slices with the floor
rule of docs/CHECKPOINTS.md (rank R of W of n rows: n*R//W .. n*(R+1)//W), so
it shares no code with stfs. Data is numpy's PCG64 bytes: no repeated blocks
that could hide a misplaced run.
"""
import hashlib
import json
import os
import struct
import sys

import numpy as np

WORLD = 8
SHARDS = 8
SUFFIX = "._S3rver_object"
ITEM_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1}
UNSIGNED_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def shard_key(index):
    return "model-%05d-of-%05d.safetensors" % (index + 1, SHARDS)


def shard_tensors(index, shard_bytes):
    """One transformer-like layer per shard: three 2-D weights of three dtypes
    (one with odd dimensions, so parts differ by a row) and 1-D norms/biases."""
    width = 4096
    rows = max(16, int(0.4 * shard_bytes) // (2 * width))
    odd_cols = 1027
    odd_rows = max(16, int(0.2 * shard_bytes) // (4 * odd_cols)) | 1
    layer = "model.layers.%d." % index
    return [
        (layer + "mlp.up_proj.weight", "BF16", [rows, width]),
        (layer + "mlp.up_proj.bias", "BF16", [rows]),
        (layer + "mlp.down_proj.weight", "F16", [width, rows]),
        (layer + "self_attn.o_proj.weight", "F32", [odd_rows, odd_cols]),
        (layer + "input_layernorm.weight", "F32", [width]),
        (layer + "post_attention_layernorm.weight", "F32", [width]),
        (layer + "self_attn.rotary.inv_freq", "I32", [odd_cols]),
        (layer + "mlp.gate_mask", "U8", [width + 3]),
    ]


def generate(directory, total_bytes):
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(20261201)
    weight_map, data_bytes = {}, 0
    for s in range(SHARDS):
        header, offset, sizes = {"__metadata__": {"format": "pt"}}, 0, []
        for name, dtype, shape in shard_tensors(s, total_bytes // SHARDS):
            n = int(np.prod(shape)) * ITEM_BYTES[dtype]
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
            offset += n
            sizes.append(n)
            weight_map[name] = shard_key(s)
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-(8 + len(h)) % 8)
        md5 = hashlib.md5()
        with open(os.path.join(directory, shard_key(s) + SUFFIX), "wb") as f:
            for chunk in [struct.pack("<Q", len(h)) + h] + sizes:
                if isinstance(chunk, int):
                    chunk = rng.bytes(chunk)
                f.write(chunk)
                md5.update(chunk)
        write_md5(directory, shard_key(s), md5.hexdigest())
        data_bytes += offset
    index = json.dumps({"metadata": {"total_size": data_bytes}, "weight_map": weight_map}).encode()
    with open(os.path.join(directory, "model.safetensors.index.json" + SUFFIX), "wb") as f:
        f.write(index)
    write_md5(directory, "model.safetensors.index.json", hashlib.md5(index).hexdigest())
    print(data_bytes)


def write_md5(directory, key, digest):
    # s3rver computes the ETag on first access otherwise: in the first mount's time.
    with open(os.path.join(directory, key + SUFFIX + ".md5"), "w") as f:
        f.write(digest)


def tensors(directory):
    """(name, dtype, shape, shard path, data offset in the file) from the headers."""
    out = []
    for s in range(SHARDS):
        path = os.path.join(directory, shard_key(s) + SUFFIX)
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name != "__metadata__":
                out.append((name, info["dtype"], info["shape"], path, 8 + n + info["data_offsets"][0]))
    return sorted(out)


def floor_range(n, r):
    return n * r // WORLD, n * (r + 1) // WORLD


def plan(directory, node, nodes, dim):
    """(mount-relative path, dtype, shape, shard path, offset, slice or None) per file."""
    ranks = range(node * WORLD // nodes, (node + 1) * WORLD // nodes)
    files = []
    for name, dtype, shape, path, offset in tensors(directory):
        if dim == "whole" or len(shape) == 1:
            files.append((name + "/data", dtype, shape, path, offset, None))
            continue
        d = int(dim)
        for r in ranks:
            part = "%d" % r if d == 0 else "%d@%d" % (r, d)
            files.append(("%s/parts/%d/%s/data" % (name, WORLD, part), dtype, shape, path, offset,
                          (d, floor_range(shape[d], r))))
    return files


def read_all(path, buf):
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            got = os.readv(fd, [buf])
            if got == 0:
                return total
            total += got
    finally:
        os.close(fd)


def read(directory, mnt, node, nodes, dim):
    buf = bytearray(1 << 20)
    print(sum(read_all(os.path.join(mnt, f[0]), buf) for f in plan(directory, node, nodes, dim)))


def size(directory, node, nodes, dim):
    total = 0
    for _, dtype, shape, _, _, piece in plan(directory, node, nodes, dim):
        dims = list(shape)
        if piece is not None:
            d, (lo, hi) = piece
            dims[d] = hi - lo
        total += int(np.prod(dims)) * ITEM_BYTES[dtype]
    print(total)


def verify(directory, mnt, node, nodes, dim):
    failures, checked = [], 0
    for rel, dtype, shape, path, offset, piece in plan(directory, node, nodes, dim):
        item = UNSIGNED_OF_SIZE[ITEM_BYTES[dtype]]
        whole = np.memmap(path, dtype=item, mode="r", offset=offset, shape=tuple(shape))
        if piece is None:
            expected = whole
        else:
            d, (lo, hi) = piece
            expected = whole[(slice(None),) * d + (slice(lo, hi),)]
        with open(os.path.join(mnt, rel), "rb") as f:
            got = f.read()
        if got != np.ascontiguousarray(expected).tobytes():
            failures.append("%s: %d bytes differ from the reference (%d expected)" %
                            (rel, len(got), expected.nbytes))
        checked += len(got)
    for line in failures:
        print(line)
    if failures:
        sys.exit(1)
    print("ok", checked)


def main(argv):
    if len(argv) == 3 and argv[0] == "generate":
        generate(argv[1], int(argv[2]))
    elif len(argv) == 5 and argv[0] == "size":
        size(argv[1], int(argv[2]), int(argv[3]), argv[4])
    elif len(argv) == 6 and argv[0] in ("read", "verify"):
        {"read": read, "verify": verify}[argv[0]](argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
