#!/usr/bin/env python3
"""The safetensors side of scripts/gpu-check.sh (needs torch, safetensors, a GPU).

1. Checks stfs against safetensors through PyTorch: for a sample of tensors,
   libstfs_gpu.so (ctypes) loads the whole tensor, a 1/W row shard and a 1/W
   column shard into torch CUDA tensors on torch's current stream, and each
   must equal safetensors' get_tensor / get_slice bit for bit.
2. Times safetensors.safe_open(framework="pt", device="cuda:0"): get_tensor of
   every tensor, and get_slice row / column shards of every 2-D tensor.
Prints "RESULT {json}" lines like stfs_gpu_bench.

Usage: safetensors_bench.py FILE LIBSTFS_GPU_SO [--world 8] [--repeat 2]
"""

import argparse
import json
import os
import sys
import time

import torch
from safetensors import safe_open

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import stfs_gpu  # noqa: E402

TORCH_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "U8": torch.uint8,
                "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64,
                "F64": torch.float64, "BOOL": torch.bool}


def result(name, nbytes, seconds, extra=""):
    gbps = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    print(f"{name:<28} {nbytes / 2**30:10.3f} GiB in {seconds:8.4f} s = {gbps:7.2f} GB/s  {extra}")
    print("RESULT " + json.dumps({"name": name, "bytes": nbytes, "seconds": round(seconds, 6), "gbps": round(gbps, 4)}))
    sys.stdout.flush()


def shard(n, rank, world):
    part = -(-n // world)
    start = min(n, part * rank)
    return start, min(n, start + part)


def bits(t):
    """A view that compares bit for bit (NaN payloads included)."""
    size = t.element_size()
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


def check_against_safetensors(path, lib, world):
    gpu = stfs_gpu.StfsGpu(lib)
    stream = torch.cuda.current_stream()
    checked = 0
    with gpu.open(path) as src, gpu.loader() as ld, safe_open(path, framework="pt", device="cuda:0") as st:
        infos = src.tensors()
        sample = infos[:: max(1, len(infos) // 12)] + infos[-1:]
        for info in sample:
            dtype = TORCH_DTYPES[info.dtype]
            cases = [("", None)]
            if len(info.shape) == 2:
                r0, r1 = shard(info.shape[0], world - 1, world)
                c0, c1 = shard(info.shape[1], 1, world)
                cases += [(f"{r0}:{r1}", ("rows", r0, r1)), (f":, {c0}:{c1}", ("cols", c0, c1))]
            for spec, kind in cases:
                shape, nbytes = src.slice_shape(info.index, spec)
                out = torch.empty(shape, dtype=dtype, device="cuda:0")
                ld.load(src, info.index, spec, out.data_ptr(), nbytes, stream.cuda_stream)
                if kind is None:
                    want = st.get_tensor(info.name)
                elif kind[0] == "rows":
                    want = st.get_slice(info.name)[kind[1]:kind[2]]
                else:
                    want = st.get_slice(info.name)[:, kind[1]:kind[2]]
                want = want.to("cuda:0")
                if not torch.equal(bits(out), bits(want)):
                    raise SystemExit(f"MISMATCH: stfs and safetensors differ on {info.name}[{spec}]")
                checked += 1
    torch.cuda.synchronize()
    print(f"check: {checked} tensors/slices loaded by stfs equal safetensors bit for bit")


def time_safetensors(path, world, repeat):
    with safe_open(path, framework="pt", device="cpu") as st:
        names = list(st.keys())
        shapes = {n: st.get_slice(n).get_shape() for n in names}
    two_d = [n for n in names if len(shapes[n]) == 2]

    def run(kind):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        keep, moved = [], 0
        with safe_open(path, framework="pt", device="cuda:0") as st:
            if kind == "whole":
                for n in names:
                    keep.append(st.get_tensor(n))
            else:
                for n in two_d:
                    s = st.get_slice(n)
                    if kind == "rows":
                        a, b = shard(shapes[n][0], 0, world)
                        keep.append(s[a:b])
                    else:
                        a, b = shard(shapes[n][1], 0, world)
                        keep.append(s[:, a:b])
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        for t in keep:
            moved += t.numel() * t.element_size()
        del keep
        torch.cuda.empty_cache()
        return dt, moved

    for kind in ("whole", "rows", "cols"):
        best, moved = None, 0
        for _ in range(repeat):
            dt, moved = run(kind)
            best = dt if best is None else min(best, dt)
        result(f"safetensors_{kind}", moved, best, f"(best of {repeat})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("lib")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-check", action="store_true")
    args = ap.parse_args()
    if not args.skip_check:
        check_against_safetensors(args.file, args.lib, args.world)
    time_safetensors(args.file, args.world, args.repeat)


if __name__ == "__main__":
    main()
