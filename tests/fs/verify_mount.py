#!/usr/bin/env python3
"""Checks an stfs mount against its source file, the way a Python user reads it.

usage: verify_mount.py SOURCE MOUNTPOINT

Parses the safetensors header itself (stdlib json), computes each tensor's
directory name from the README's rule (written here independently of the C++
code), then compares the root listing, every tensor directory's listing,
`dtype`, `shape`, `__metadata__`, and every byte of `data` read twice: with
plain read() calls of varying sizes, and through the mmap module (whole file
and a page-aligned window). Prints one "ok" line and exits 0, or prints each
mismatch and exits 1. Python 3 standard library only.
"""
import json
import mmap
import os
import struct
import sys

RESERVED_ROOT_FILES = (b"__metadata__", b"__stats__")


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def expected_dir_name(name):
    """The directory name rule, from its text; `name` and the result are bytes."""
    if not name:
        return b"%"
    out = bytearray()
    for b in name:
        if b in (0x25, 0x2F) or b < 0x20 or b == 0x7F:
            out += b"%%%02X" % b
        else:
            out.append(b)
    out = bytes(out)
    if out == b".":
        return b"%2E"
    if out == b"..":
        return b"%2E%2E"
    if len(out) <= 255:
        return out
    cut = 200
    while cut > 0 and ((out[cut] & 0xC0) == 0x80 or out[cut - 1:cut] == b"%" or (cut >= 2 and out[cut - 2] == 0x25)):
        cut -= 1
    return out[:cut] + b"~%016x" % fnv1a64(name)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
    return 8 + n, header


def read_plain(path, size):
    """Reads a file with a mix of read sizes, the way naive readers do."""
    chunks = []
    sizes = [1, 7, 4096, 65536, 1 << 20, 3 << 20]
    with open(path, "rb", buffering=0) as f:
        i = 0
        while True:
            b = f.read(sizes[i % len(sizes)])
            if not b:
                break
            chunks.append(b)
            i += 1
    return b"".join(chunks)


def main():
    source, mnt = sys.argv[1], sys.argv[2]
    data_start, header = read_header(source)
    errors = []
    metadata = header.pop("__metadata__", None)
    with open(source, "rb") as f:
        blob = f.read()

    dirs = {}
    for name, info in header.items():
        dirs[expected_dir_name(name.encode("utf-8", "surrogatepass"))] = (name, info)
    want_root = sorted(set(dirs) | set(RESERVED_ROOT_FILES))
    listing = os.listdir(os.fsencode(mnt))
    if len(listing) != len(set(listing)):
        errors.append("root listing has duplicate names")
    if sorted(listing) != want_root:
        extra = sorted(set(listing) - set(want_root))[:5]
        missing = sorted(set(want_root) - set(listing))[:5]
        errors.append("root listing differs: extra %r missing %r" % (extra, missing))

    if b"__metadata__" not in dirs:
        with open(os.path.join(mnt, "__metadata__"), "rb") as f:
            text = f.read()
        if not text.endswith(b"\n") or json.loads(text) != (metadata or {}):
            errors.append("__metadata__ is %r, want %r" % (text, metadata or {}))

    total = 0
    for dir_name, (name, info) in dirs.items():
        d = os.path.join(os.fsencode(mnt), dir_name)
        if sorted(os.listdir(d)) != [b"data", b"data.npy", b"dtype", b"shape"]:
            errors.append("%r: listing %r" % (name, sorted(os.listdir(d))))
            continue
        with open(os.path.join(d, b"dtype"), "rb") as f:
            if f.read() != info["dtype"].encode() + b"\n":
                errors.append("%r: dtype differs" % name)
        with open(os.path.join(d, b"shape"), "rb") as f:
            want_shape = json.dumps(info["shape"], separators=(",", ":")).encode() + b"\n"
            if f.read() != want_shape:
                errors.append("%r: shape differs" % name)
        begin, end = info["data_offsets"]
        want = blob[data_start + begin:data_start + end]
        path = os.path.join(d, b"data")
        if os.stat(path).st_size != len(want):
            errors.append("%r: st_size %d, want %d" % (name, os.stat(path).st_size, len(want)))
        if read_plain(path, len(want)) != want:
            errors.append("%r: read() bytes differ" % name)
        npy_path = os.path.join(d, b"data.npy")
        npy_size = os.stat(npy_path).st_size
        npy = read_plain(npy_path, npy_size)
        if (len(npy) != npy_size or not npy.startswith(b"\x93NUMPY") or (npy_size - len(want)) % 64
                or npy[npy_size - len(want):] != want):
            errors.append("%r: data.npy is not an .npy header followed by the data" % name)
        if want:
            with open(path, "rb") as f:
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                    if m[:] != want:
                        errors.append("%r: mmap bytes differ" % name)
                page = mmap.ALLOCATIONGRANULARITY
                if len(want) > 2 * page:
                    with mmap.mmap(f.fileno(), page, access=mmap.ACCESS_READ, offset=page) as m:
                        if m[:] != want[page:2 * page]:
                            errors.append("%r: mmap at offset %d differs" % (name, page))
        total += len(want)

    for e in errors:
        print("MISMATCH:", e)
    if errors:
        return 1
    print("ok: %d tensors, %d bytes" % (len(dirs), total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
