#!/usr/bin/env python3
"""End-to-end benchmark of stfs against safetensors (scripts/gpu-check.sh).

Both sides are timed the same way: from nothing open to every tensor on
cuda:0 and torch.cuda.synchronize() -- opening the source, staging buffers
(stfs: its pinned budget) and device allocation (torch's, emptied between
runs) all inside the time:
  whole:  stfs.load_file(path, device="cuda:0")
          vs safetensors.torch.load_file(path, device="cuda:0")
  shards: stfs.load_file(..., slices=stfs.shard(W, rank, dim)) for a row
          (dim 0) and a column (dim -1) shard of every tensor
          vs safe_open(path, "pt", device="cuda:0").get_slice(name)[index]
          with the same index per tensor.
Every stfs result is compared bit for bit with what safetensors/torch
loaded (not with stfs's own planner). For the column shard it also reports
the bytes stfs read from the source and copied against the shard's size.
Prints a human line and "RESULT {json}" per measurement; a mismatch exits 1.

Usage: end_to_end_bench.py FILE [FILE ...] [--world 8] [--rank 1] [--repeat 3]
(each FILE a copy of the same model: e.g. one in /dev/shm, one on disk
warmed into the page cache; a label is taken from its directory).
"""

import argparse
import json
import os
import sys
import time

import torch
from safetensors import safe_open
from safetensors.torch import load_file as st_load_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import stfs  # noqa: E402

DEVICE = "cuda:0"


def result(name, nbytes, seconds, **extra):
    gbps = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    note = " ".join(f"{k}={v}" for k, v in extra.items())
    print(f"{name:<34} {nbytes / 2**30:9.3f} GiB in {seconds:8.4f} s = {gbps:7.2f} GB/s  {note}", flush=True)
    print("RESULT " + json.dumps({"name": name, "bytes": nbytes, "seconds": round(seconds, 6),
                                  "gbps": round(gbps, 4), **extra}), flush=True)


def warm(path):
    """Reads the file once so it is in the page cache (tmpfs always is)."""
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def fresh():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the next run pays for its device allocations


def timed(fn, repeat):
    """Best time of `repeat` runs of fn() (each from nothing), and the last output."""
    best, out = None, None
    for _ in range(repeat):
        out = None
        fresh()
        t0 = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, out


def bits(t):
    size = t.element_size()
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def verify(label, got, want):
    if list(got) != list(want) and set(got) != set(want):
        raise SystemExit(f"MISMATCH {label}: stfs loaded {len(got)} tensors, safetensors {len(want)}")
    for name, t in want.items():
        if not same(got[name], t):
            raise SystemExit(f"MISMATCH {label}: {name} differs between stfs and safetensors")
    print(f"verify {label}: {len(want)} tensors equal safetensors' bit for bit", flush=True)


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors.values())


def safetensors_shard(path, shard):
    out = {}
    with safe_open(path, framework="pt", device=DEVICE) as f:
        for name in f.keys():
            sl = f.get_slice(name)
            spec = shard(name, tuple(sl.get_shape()))
            if spec is None:
                out[name] = f.get_tensor(name)
                continue
            index = tuple(slice(None) if p == ":" else slice(*(int(x) for x in p.split(":")))
                          for p in spec.split(", "))
            out[name] = sl[index]
    return out


def bench_file(path, label, world, rank, repeat):
    warm(path)
    size = os.path.getsize(path)
    print(f"== {label}: {path} ({size / 2**30:.3f} GiB)", flush=True)

    t_st, want = timed(lambda: st_load_file(path, device=DEVICE), repeat)
    result(f"safetensors_whole_{label}", nbytes(want), t_st)
    t_stfs, got = timed(lambda: stfs.load_file(path, device=DEVICE), repeat)
    result(f"stfs_whole_{label}", nbytes(got), t_stfs)
    verify(f"whole ({label})", got, want)
    del got, want

    for kind, dim in (("rows", 0), ("cols", -1)):
        shard = stfs.shard(world, rank, dim)
        t_st, want = timed(lambda: safetensors_shard(path, shard), repeat)
        result(f"safetensors_{kind}_{label}", nbytes(want), t_st)
        stats = {}

        def run():
            stats.clear()
            return stfs.load_file(path, device=DEVICE, slices=shard, stats=stats)

        t_stfs, got = timed(run, repeat)
        shard_bytes = nbytes(got)
        result(f"stfs_{kind}_{label}", shard_bytes, t_stfs, bytes_read=stats.get("bytes_read", 0),
               bytes_copied=stats.get("bytes_copied", 0), shard_bytes=shard_bytes,
               read_over_shard=round(stats.get("bytes_read", 0) / max(1, shard_bytes), 4))
        verify(f"{kind} shard ({label})", got, want)
        del got, want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.cuda.init()
    staging = 8 * 16 << 20  # stfs's default LoaderOptions: 8 x 16 MiB pinned
    print(f"stfs host staging: {staging >> 20} MiB pinned (default options)")
    print("RESULT " + json.dumps({"name": "stfs_host_staging", "bytes": staging, "seconds": 0, "gbps": 0}))
    for path in args.files:
        label = "shm" if path.startswith("/dev/shm/") else "pagecache"
        bench_file(path, label, args.world, args.rank, args.repeat)


if __name__ == "__main__":
    main()
