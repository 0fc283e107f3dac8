#!/usr/bin/env python3
"""Loads every kind of data.npy of a mount with numpy and checks it.

usage: verify_npy.py SOURCE MOUNTPOINT

For every tensor (directories named as the tensor; the test uses plain
names) loads `data.npy`, the `data.npy` of a few slices and of a few rank
parts with numpy.load(mmap_mode='r'): it must be a memory map whose dtype
is the documented descriptor (stand-ins for BF16 and the F8 family, packed
bytes for 4/6-bit dtypes), whose shape is the tensor's (or the slice's), and
whose bytes equal the reference cut from the source file with numpy here.
Prints "ok N" or each mismatch and exits 1.
"""
import json
import struct
import sys

import numpy as np

# The table of docs/CHECKPOINTS.md, written out here.
DESCR = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "F16": "<f2", "I32": "<i4",
         "U32": "<u4", "F32": "<f4", "I64": "<i8", "U64": "<u8", "F64": "<f8", "C64": "<c8", "BF16": "<u2",
         "F8_E4M3": "|u1", "F8_E5M2": "|u1", "F8_E4M3FNUZ": "|u1", "F8_E5M2FNUZ": "|u1", "F8_E8M0": "|u1"}
BITS = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}

failures = []
loaded = 0


def check(path, want_descr, want_shape, want_bytes):
    global loaded
    try:
        a = np.load(path, mmap_mode="r")
    except Exception as e:  # noqa: BLE001 - report any failure to load
        failures.append("%s: numpy.load failed: %s" % (path, e))
        return
    if not isinstance(a, np.memmap):
        failures.append("%s: not memory-mapped (%s)" % (path, type(a)))
    if a.dtype.str != want_descr or list(a.shape) != list(want_shape):
        failures.append("%s: %s %s, expected %s %s" % (path, a.dtype.str, a.shape, want_descr, want_shape))
    elif a.tobytes() != want_bytes:
        failures.append("%s: bytes differ from the reference" % path)
    loaded += 1


def main():
    source, mnt = sys.argv[1], sys.argv[2]
    with open(source, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    for name, t in header.items():
        dtype, shape = t["dtype"], t["shape"]
        begin, end = t["data_offsets"]
        raw = blob[8 + n + begin:8 + n + end]
        tdir = mnt + "/" + name
        if dtype in BITS:
            if shape and shape[-1] * BITS[dtype] % 8 == 0:
                packed = shape[:-1] + [shape[-1] * BITS[dtype] // 8]
            else:
                packed = [len(raw)]
            check(tdir + "/data.npy", "|u1", packed, raw)
            continue
        item = np.dtype(DESCR[dtype]).itemsize
        ref = np.frombuffer(raw, dtype=np.uint8).reshape(shape + [item])
        check(tdir + "/data.npy", DESCR[dtype], shape, raw)
        if not shape:
            continue
        # A slice along dimension 0 and, when there is one, a strided slice of the last dimension.
        cut = ref[1:]
        check(tdir + "/slices/1:/data.npy", DESCR[dtype], list(cut.shape[:-1]), cut.tobytes())
        if len(shape) >= 2:
            cut = ref[..., ::2, :]
            check(tdir + "/slices/...,::2/data.npy", DESCR[dtype], list(cut.shape[:-1]), cut.tobytes())
        # Rank 1 of 2 along the last dimension (floor rule), when it has two rows.
        d = len(shape) - 1
        if shape[d] >= 2:
            lo, hi = shape[d] // 2, shape[d]
            cut = ref[(slice(None),) * d + (slice(lo, hi),)]
            name_d = "" if d == 0 else "@%d" % d
            check(tdir + "/parts/2/1" + name_d + "/data.npy", DESCR[dtype], list(cut.shape[:-1]), cut.tobytes())
    if failures:
        for f in failures[:50]:
            print(f)
        print("%d failures" % len(failures))
        return 1
    print("ok %d" % loaded)
    return 0


if __name__ == "__main__":
    sys.exit(main())
