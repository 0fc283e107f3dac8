#!/usr/bin/env python3
"""Smoke test of libstfs_gpu.so through ctypes (standard library only).

Writes a safetensors file with random bytes, lists it, loads whole tensors,
row and column shards through the host loader into ctypes buffers and
compares with slices computed here from the file bytes; checks the error
and no-device paths. Usage: ctypes_smoke_test.py path/to/libstfs_gpu.so
"""

import ctypes
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from stfs import _native as stfs_gpu  # noqa: E402


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, element_size); returns {name: bytes}."""
    header, data, blobs = {}, b"", {}
    for name, dtype, shape, esize in tensors:
        n = esize
        for d in shape:
            n *= d
        blob = os.urandom(n)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + n]}
        data += blob
        blobs[name] = blob
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return blobs


def rows_cols(blob, rows, cols, esize, r0, r1, c0, c1):
    row_bytes = cols * esize
    return b"".join(blob[r * row_bytes + c0 * esize: r * row_bytes + c1 * esize] for r in range(r0, r1))


def main():
    gpu = stfs_gpu.StfsGpu(sys.argv[1])
    checks = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.safetensors")
        blobs = write_safetensors(path, [("emb", "BF16", (96, 40), 2), ("norm", "F32", (40,), 4)])
        with gpu.open(path) as src, gpu.loader(host=True, staging_buffer_bytes=1024, staging_buffer_count=3) as ld:
            infos = src.tensors()
            assert [(i.name, i.dtype, i.shape) for i in infos] == [("emb", "BF16", (96, 40)), ("norm", "F32", (40,))], infos
            emb = src.find("emb")
            for spec, want in [
                ("", blobs["emb"]),
                ("12:24", rows_cols(blobs["emb"], 96, 40, 2, 12, 24, 0, 40)),
                (":, 35:40", rows_cols(blobs["emb"], 96, 40, 2, 0, 96, 35, 40)),
                ("-1", rows_cols(blobs["emb"], 96, 40, 2, 95, 96, 0, 40)),
            ]:
                shape, nbytes = src.slice_shape(emb, spec)
                assert nbytes == len(want), (spec, nbytes, len(want))
                buf = ctypes.create_string_buffer(nbytes)
                assert ld.load(src, emb, spec, ctypes.addressof(buf), nbytes) == nbytes
                assert buf.raw == want, spec
                checks += 1
            # A batch: a column shard of emb and the whole norm.
            a = ctypes.create_string_buffer(96 * 5 * 2)
            b = ctypes.create_string_buffer(160)
            ld.load_batch(src, [(src.find("norm"), "", ctypes.addressof(b), 160), (emb, ":, 0:5", ctypes.addressof(a), len(a))])
            assert b.raw == blobs["norm"] and a.raw == rows_cols(blobs["emb"], 96, 40, 2, 0, 96, 0, 5)
            assert ld.stats()["bytes_copied"] == 160 + len(a)
            checks += 1
            # Errors come back as codes with messages naming the problem.
            small = ctypes.create_string_buffer(10)
            for spec, code in [("", "INVALID_ARGUMENT"), ("200", "INVALID_ARGUMENT"), ("::0", "INVALID_ARGUMENT")]:
                try:
                    ld.load(src, emb, spec, ctypes.addressof(small), 10)
                except stfs_gpu.StfsGpuError as e:
                    assert e.name == code, (spec, e)
                    assert "emb" in e.message or "step" in e.message or "slice" in e.message, e.message
                    checks += 1
                else:
                    raise AssertionError(f"slice {spec!r} into 10 bytes should fail")
        try:
            gpu.open(os.path.join(tmp, "absent.safetensors"))
        except stfs_gpu.StfsGpuError as e:
            assert e.name == "NOT_FOUND" and "absent" in e.message, e
            checks += 1
    # No device here: a clear NO_DEVICE; with one, a working loader.
    if gpu.device_count() == 0:
        try:
            gpu.loader()
        except stfs_gpu.StfsGpuError as e:
            assert e.name == "NO_DEVICE" and e.message.startswith("no CUDA device"), e
            checks += 1
        else:
            raise AssertionError("loader() without a device should fail")
    else:
        gpu.loader().close()
        checks += 1
    print(f"ctypes smoke: {checks} passed, 0 failed")


if __name__ == "__main__":
    main()
