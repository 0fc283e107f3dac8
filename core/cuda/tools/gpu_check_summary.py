#!/usr/bin/env python3
"""Turns the RESULT lines of a scripts/gpu-check.sh run into figures and
verdicts against the issue's targets. Prints only what was measured.

Usage: gpu_check_summary.py RESULTS_FILE CPU_ONLY(0|1) WORLD
"""

import json
import sys


def main():
    res = {}
    for line in open(sys.argv[1]):
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            res[r["name"]] = r
    cpu_only, world = sys.argv[2] == "1", int(sys.argv[3])
    for name, r in res.items():
        if r.get("seconds"):
            print(f"  {name:<34} {r['gbps']:8.2f} GB/s  ({r['bytes'] / 2**30:.3f} GiB, {r['seconds']:.4f} s)")

    def gbps(name):
        return res[name]["gbps"] if name in res and res[name].get("gbps") else None

    def ratio(a, b):
        return gbps(a) / gbps(b) if gbps(a) and gbps(b) else None

    def verdict(label, value, goal, at_least=True):
        if value is None:
            print(f"  {label:<60} n/a (not measured)")
            return
        ok = value >= goal if at_least else value <= goal
        sign = ">=" if at_least else "<="
        print(f"  {label:<60} {value:8.3f}  (target {sign} {goal}: {'met' if ok else 'NOT met'})")

    if cpu_only:
        print("  CPU only: no device figures; the device run is still owed")
        return
    for loc in ("shm", "pagecache"):
        verdict(f"stfs whole ({loc}) / pinned ceiling", ratio(f"stfs_whole_{loc}", "pinned_h2d_ceiling"), 0.9)
        verdict(f"stfs whole ({loc}) / safetensors load_file",
                ratio(f"stfs_whole_{loc}", f"safetensors_whole_{loc}"), 5.0)
        for kind in ("rows", "cols"):
            r = ratio(f"stfs_{kind}_{loc}", f"safetensors_{kind}_{loc}")
            if r is not None:
                print(f"  stfs {kind} shard ({loc}) / safetensors get_slice{'':<14} {r:8.3f}")
        c = res.get(f"stfs_cols_{loc}")
        if c:
            verdict(f"1/{world} column shard ({loc}): bytes copied / shard size",
                    c["bytes_copied"] / max(1, c["shard_bytes"]), 1.1, at_least=False)
            print(f"  1/{world} column shard ({loc}): bytes read from the source / shard size = "
                  f"{c['read_over_shard']:.3f}")
    staging = res.get("stfs_host_staging")
    verdict("stfs host staging, MiB", staging["bytes"] / 2**20 if staging else None, 512, at_least=False)


if __name__ == "__main__":
    main()
