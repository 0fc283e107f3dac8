#!/usr/bin/env bash
# bench-checkpoints.sh: rank parts and sharded-index mounts (issue 10), local
# and over a local nginx, in one run on this machine.
#
#   1. a 1 GiB F32 tensor [16384,16384]: reading parts/8/3@1/data (a column
#      piece, 128 MiB in 16,384 runs of 8 KiB) — bytes read from the source
#      (local: the daemon's rchar in /proc/PID/io; HTTP: bytes_fetched from
#      __stats__) against the part's size, and its throughput against reading
#      as many bytes of the tensor's data (dd bs=1M of its first 128 MiB) and
#      the whole tensor's data (dd bs=1M), fresh mount each;
#   2. mount time of a 100-shard, 50,000-tensor index: a local directory and
#      the index URL over nginx (median of STFS_BENCH_TRIALS, default 3).
# Targets: bytes read <= 1.1x the part; the remote index mounts in < 2 s.
# Run as `scripts/bench-local.sh checkpoints` or `scripts/bench-remote.sh
# checkpoints` (both run everything). Never writes outside its temp dir;
# stops nginx and unmounts everything on exit.
#
#   STFS_BIN=path/to/stfs   use this binary instead of building build-bench-remote/
#   STFS_BENCH_TRIALS=3     rounds for mount times
set -euo pipefail
TRIALS="${STFS_BENCH_TRIALS:-3}"

# shellcheck source=scripts/bench-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-checkpoints
bench_require curl python3 dd fusermount3 awk sort
bench_build_stfs "$ROOT/build-bench-remote" -DSTFS_BUILD_CUDA=OFF -DSTFS_BUILD_REMOTE=ON
bench_workdir stfs-bench-ckpt 1200
mkdir -p "$WORK/www/shards"
bench_nginx_start "$WORK/www"
URL="$NGINX_URL"

python3 - "$WORK/www" <<'PY'
import json, os, struct, sys
www = sys.argv[1]
def write(path, tensors, data):
    h = json.dumps(tensors, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        if isinstance(data, int):
            block = os.urandom(16 << 20)
            while data > 0:
                f.write(block[:min(len(block), data)]); data -= min(len(block), data)
        else:
            f.write(data)
n = 16384 * 16384 * 4
write(www + "/big.safetensors", {"w": {"dtype": "F32", "shape": [16384, 16384], "data_offsets": [0, n]}}, n)
weight_map = {}
for s in range(100):
    name = "model-%05d-of-00100.safetensors" % (s + 1)
    tensors, off = {}, 0
    for i in range(500):
        t = "model.layers.%d.block.%d.weight" % (s, i)
        tensors[t] = {"dtype": "F32", "shape": [4], "data_offsets": [off, off + 16]}
        off += 16
        weight_map[t] = name
    write(www + "/shards/" + name, tensors, os.urandom(off))
with open(www + "/shards/model.safetensors.index.json", "w") as f:
    json.dump({"metadata": {"total_size": 100 * 500 * 16}, "weight_map": weight_map}, f)
PY

now_ns() { date +%s%N; }
mount_count=0
do_mount() {  # source [options]; sets MNT
  MNT="$WORK/m$((mount_count++))"; mkdir -p "$MNT"; MOUNTS+=("$MNT")
  if [[ -n "${2:-}" ]]; then "$STFS" -o "$2" "$1" "$MNT"; else "$STFS" "$1" "$MNT"; fi
}
do_unmount() { fusermount3 -u "$1"; rmdir "$1"; }
daemon_pid() {  # mountpoint: the stfs process whose argv ends with it
  local p
  for p in $(pgrep -f -- "$1" || true); do
    [[ "$(readlink "/proc/$p/exe")" == "$(readlink -f "$STFS")" ]] && { echo "$p"; return; }
  done
}
rchar() { awk '/^rchar/ {print $2}' "/proc/$1/io"; }
dd_secs() {  # file [MiB]: ns to read it (or its first MiB) with dd bs=1M
  local t0; t0=$(now_ns)
  dd if="$1" of=/dev/null bs=1M ${2:+count=$2} status=none
  echo "$(( $(now_ns) - t0 ))"
}
gbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.2f", b / ns }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

PART=$((16384 * 2048 * 4))
WHOLE=$((16384 * 16384 * 4))
cat "$WORK/www/big.safetensors" >/dev/null  # warm the page cache
echo "== 1. parts/8/3@1 (and parts/8/3) of a 1 GiB F32 [16384,16384] tensor (a part: $PART bytes)"
for where in local http local-dim0 http-dim0; do
  part="parts/8/3@1"; [[ $where == *-dim0 ]] && part="parts/8/3"
  src="$WORK/www/big.safetensors"; [[ $where == http* ]] && src="$URL/big.safetensors"
  do_mount "$src"; pid=$(daemon_pid "$MNT"); before=$(rchar "$pid")
  ns=$(dd_secs "$MNT/w/$part/data")
  if [[ $where == local* ]]; then
    read_bytes=$(( $(rchar "$pid") - before ))
  else
    read_bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["source"]["bytes_fetched"])' "$MNT/__stats__")
  fi
  do_unmount "$MNT"
  do_mount "$src"; same_ns=$(dd_secs "$MNT/w/data" $((PART >> 20))); do_unmount "$MNT"
  do_mount "$src"; whole_ns=$(dd_secs "$MNT/w/data"); do_unmount "$MNT"
  printf '%-10s %s: %s bytes read from the source = %sx the part; %s GB/s (%.2f s); same bytes of data: %s GB/s; whole tensor: %s GB/s\n' \
    "$where" "$part" "$read_bytes" "$(awk -v a="$read_bytes" -v b="$PART" 'BEGIN{printf "%.3f", a/b}')" \
    "$(gbps "$PART" "$ns")" "$(awk -v ns="$ns" 'BEGIN{print ns/1e9}')" "$(gbps "$PART" "$same_ns")" "$(gbps "$WHOLE" "$whole_ns")"
done

echo "== 2. mount time of a 100-shard, 50,000-tensor index (median of $TRIALS)"
for where in local http; do
  src="$WORK/www/shards"; [[ $where == http ]] && src="$URL/shards/model.safetensors.index.json"
  for _ in $(seq "$TRIALS"); do
    MNT="$WORK/m$((mount_count++))"; mkdir -p "$MNT"; MOUNTS+=("$MNT")
    t0=$(now_ns); "$STFS" "$src" "$MNT"; t1=$(now_ns)
    [[ $(ls "$MNT" | wc -l) == 50003 ]] || die "$where mount lists $(ls "$MNT" | wc -l) entries"
    do_unmount "$MNT"
    awk -v ns="$((t1 - t0))" 'BEGIN { printf "%.3f\n", ns / 1e9 }'
  done | median | { read -r m; printf '%-5s %s s\n' "$where" "$m"; }
done
