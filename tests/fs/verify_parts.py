#!/usr/bin/env python3
"""Checks a mount's rank parts against an independent numpy reference.

usage: verify_parts.py SOURCE MOUNTPOINT SEED

Parses the safetensors header itself, views each tensor's bytes as a numpy
array of shape (*shape, itemsize) uint8, and for every whole-byte tensor,
every dimension D and several world sizes W (1, the dimension's size and
random ones in between) reads every rank's `parts/W/R[@D]` and
`parts/W/R[@D]~ceil` directory: `shape`, `dtype` and every byte of `data`
must equal the reference piece (floor rule rows n*R//W .. n*(R+1)//W; ceil
rule size ceil(n/W)), and the W pieces laid back together along D must give
the whole tensor, each row exactly once. Names that are not parts (W = 0 or
above every dimension, R >= W, leading zeros, "@0", D >= rank) must be
ENOENT. Prints "ok N" or each mismatch and exits 1.
"""
import errno
import json
import os
import random
import struct
import sys

import numpy as np

ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1,
              "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
              "I64": 8, "U64": 8, "F64": 8, "C64": 8}

failures = []
checked = 0


def fail(message):
    failures.append(message)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def floor_range(n, w, r):
    return n * r // w, n * (r + 1) // w


def ceil_range(n, w, r):
    size = -(-n // w)
    return min(n, r * size), min(n, (r + 1) * size)


def rank_name(r, d, ceil):
    return str(r) + ("" if d == 0 else "@%d" % d) + ("~ceil" if ceil else "")


def check_part(tdir, name, arr, shape, dtype, w, r, d, ceil):
    global checked
    lo, hi = (ceil_range if ceil else floor_range)(shape[d], w, r)
    expected = arr[(slice(None),) * d + (slice(lo, hi),)]
    pdir = "%s/parts/%d/%s" % (tdir, w, rank_name(r, d, ceil))
    want_shape = list(shape)
    want_shape[d] = hi - lo
    got_shape = read(pdir + "/shape").decode()
    if got_shape != json.dumps(want_shape, separators=(",", ":")) + "\n":
        fail("%s/shape: %r, expected %r" % (pdir, got_shape, want_shape))
    if read(pdir + "/dtype").decode() != dtype + "\n":
        fail("%s/dtype wrong" % pdir)
    data = read(pdir + "/data")
    if os.stat(pdir + "/data").st_size != len(data) or data != np.ascontiguousarray(expected).tobytes():
        fail("%s/data differs from the reference (%d bytes read)" % (pdir, len(data)))
    checked += 1
    return lo, hi, data


def expect_enoent(path):
    try:
        os.stat(path)
        fail("%s exists, expected ENOENT" % path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            fail("%s: %s, expected ENOENT" % (path, e))


def main():
    source, mnt, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    blob = read(source)
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    for name, t in header.items():
        dtype, shape = t["dtype"], t["shape"]
        tdir = mnt + "/" + name  # the test uses plain names
        if not shape:
            expect_enoent(tdir + "/parts/1")
            continue
        if dtype not in ITEM_BYTES:
            continue  # sub-byte dtypes: the core's unit tests own them
        begin, end = t["data_offsets"]
        arr = np.frombuffer(blob[8 + n + begin:8 + n + end], dtype=np.uint8).reshape(shape + [ITEM_BYTES[dtype]])
        for d in range(len(shape)):
            size = shape[d]
            worlds = {1, size} | {rng.randint(1, size) for _ in range(3)}
            for w in sorted(worlds):
                for ceil in (False, True):
                    pieces = []
                    covered = np.zeros(size, dtype=np.int64)
                    for r in range(w):
                        lo, hi, data = check_part(tdir, name, arr, shape, dtype, w, r, d, ceil)
                        covered[lo:hi] += 1
                        piece_shape = list(shape) + [ITEM_BYTES[dtype]]
                        piece_shape[d] = hi - lo
                        pieces.append(np.frombuffer(data, dtype=np.uint8).reshape(piece_shape))
                    whole = np.concatenate(pieces, axis=d)
                    if not (covered == 1).all() or whole.tobytes() != arr.tobytes():
                        fail("%s: the %d parts along %d (ceil=%s) do not tile the tensor once" % (name, w, d, ceil))
                expect_enoent("%s/parts/%d/%d" % (tdir, w, w) + ("" if d == 0 else "@%d" % d))
        top = max(shape)
        for bad in ("0", str(top + 1), "01", "x", "-1"):
            expect_enoent("%s/parts/%s" % (tdir, bad))
        expect_enoent("%s/parts/1/0@0" % tdir)
        expect_enoent("%s/parts/1/00" % tdir)
        expect_enoent("%s/parts/1/0@%d" % (tdir, len(shape)))
        expect_enoent("%s/parts/1/0~floor" % tdir)
    if failures:
        for f in failures[:50]:
            print(f)
        print("%d failures" % len(failures))
        return 1
    print("ok %d parts" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
