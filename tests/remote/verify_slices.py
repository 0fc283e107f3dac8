#!/usr/bin/env python3
"""Checks a mount's slice views against numpy's own basic indexing.

usage: verify_slices.py SOURCE MOUNTPOINT SPEC...

Parses the safetensors header itself, views each whole-byte tensor (plain
names, rank >= 1) as a numpy array of shape `shape` whose elements are
opaque items of the dtype's size, and for every SPEC that numpy accepts on
it (evaluated as array[SPEC], so numpy is the reference, not a rewrite of
the rules) reads `slices/SPEC/{data,dtype,shape}`: the dtype, the shape and
every byte of `data` must equal numpy's, and `data.npy` must end with the
same bytes. A SPEC numpy refuses is not checked. Prints "ok N" (N views
checked) or each mismatch and exits 1.
"""
import json
import struct
import sys

import numpy as np

ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1,
              "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
              "I64": 8, "U64": 8, "F64": 8, "C64": 8}


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    source, mnt, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    blob = read(source)
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    failures, checked = [], 0
    for name, t in header.items():
        dtype, shape = t["dtype"], t["shape"]
        if dtype not in ITEM_BYTES or not shape:
            continue
        begin, end = t["data_offsets"]
        ref = np.frombuffer(blob[8 + n + begin:8 + n + end], dtype=np.dtype(("V", ITEM_BYTES[dtype])))
        ref = ref.reshape(shape)
        for spec in specs:
            try:
                want = eval("ref[" + spec + "]", {"ref": ref})  # noqa: S307 - specs come from the test
            except IndexError:
                continue
            view = "%s/%s/slices/%s" % (mnt, name, spec)
            want_shape = "[" + ",".join(str(d) for d in np.shape(want)) + "]\n"
            want_bytes = np.ascontiguousarray(want).tobytes()
            try:
                got_shape, got_dtype = read(view + "/shape").decode(), read(view + "/dtype").decode()
                data, npy = read(view + "/data"), read(view + "/data.npy")
            except OSError as e:
                failures.append("%s: %s" % (view, e))
                continue
            if got_shape != want_shape or got_dtype != dtype + "\n":
                failures.append("%s: %r %r, expected %r %r" % (view, got_dtype, got_shape, dtype, want_shape))
            if data != want_bytes:
                failures.append("%s: data differs from numpy's (%d bytes, expected %d)"
                                % (view, len(data), len(want_bytes)))
            if len(npy) < len(want_bytes) + 64 or not npy.endswith(want_bytes):
                failures.append("%s: data.npy does not end with numpy's bytes" % view)
            checked += 1
    if failures:
        for f in failures[:50]:
            print(f)
        print("%d failures" % len(failures))
        return 1
    print("ok %d" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
