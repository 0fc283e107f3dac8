#!/usr/bin/env bash
# bench-local.sh: how fast a local safetensors file reads through an stfs
# mount, against the same bytes read directly, in one run on this machine.
#
#   1. a 2 GiB tensor: direct read of its bytes from the source file (warm
#      page cache) vs the mount's `data` (first read on a fresh mount, then
#      repeated reads), all with the same reader (dd bs=1M), as GB/s and ratios;
#   2. the same first read with -o read_reply=splice (default) vs pread, and with
#      -o readahead_kb=128, 1024, 4096;
#   3. the daemon's peak RSS (VmHWM) after serving the 2 GiB read;
#   4. mount time and `ls -lR` time for a file of 10,000 tensors.
#
# `scripts/bench-local.sh checkpoints` runs scripts/bench-checkpoints.sh.
# `scripts/bench-local.sh headers` measures header parsing instead (issue 8):
# stfs-parse-header (ReadHeader alone: time and peak RSS) against python3's
# json.loads of the same bytes, for a 100,000-tensor header, a 100,000-key
# __metadata__, a header at the 100,000,000-byte limit and 10 MB of nested
# brackets; then mount time and `ls -lR` time of the 100,000-tensor file.
#
# Each mount read is paired with a direct read taken just before it (the load
# on a shared machine changes from second to second) and ratios are medians
# of those pairs over STFS_BENCH_TRIALS rounds (default 3). Needs root for the readahead setting (as the mount
# itself does) and about 2x the tensor size of free memory so both copies stay
# cached. Never writes outside its temp dir; unmounts everything on exit.
#
# usage: scripts/bench-local.sh            (environment knobs below)
#   STFS_BIN=path/to/stfs    use this binary instead of building build-bench/
#   STFS_BENCH_MIB=2048      tensor size in MiB
#   STFS_BENCH_TRIALS=3      trials per figure
#   STFS_BENCH_TENSORS=10000 tensors in the many-tensor file
#   STFS_BENCH_EXTRA="label|opt=v,opt=v;..."  more first-read configurations (-o lists)
#   STFS_BENCH_HEADER_TENSORS=100000  tensors/keys in the headers mode
#   TMPDIR=/tmp              where the temp dir goes
set -euo pipefail
MODE="${1:-reads}"
# `scripts/bench-local.sh checkpoints`: rank parts and sharded-index mounts (local and HTTP).
[[ "$MODE" == checkpoints ]] && exec "$(dirname "${BASH_SOURCE[0]}")/bench-checkpoints.sh"

SIZE_MIB="${STFS_BENCH_MIB:-2048}"
TRIALS="${STFS_BENCH_TRIALS:-3}"
TENSORS="${STFS_BENCH_TENSORS:-10000}"

# shellcheck source=scripts/bench-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-local
bench_require python3 dd fusermount3 awk sort
bench_build_stfs "$ROOT/build-bench" -DSTFS_BUILD_CUDA=OFF -DSTFS_BUILD_REMOTE=OFF
if [[ "$MODE" == headers ]]; then bench_workdir stfs-bench 1024; else bench_workdir stfs-bench $((SIZE_MIB + 64)); fi

mem_avail_mib=$(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo)
if [[ "$MODE" != headers ]] && ((mem_avail_mib < 2 * SIZE_MIB + 1024)); then
  note "warning: ${mem_avail_mib} MiB available memory; the source and the mount's cache may not both stay cached"
fi

# --- files -------------------------------------------------------------------
# Writes a safetensors file: one U8 tensor "big" of SIZE bytes of non-zero
# pseudo-random data (a 16 MiB block of urandom repeated), or TENSORS small
# F32 tensors. Prints the file offset of the first data byte.
make_file() {  # kind path arg
  python3 - "$@" <<'PY'
import json, os, struct, sys
kind, path, arg = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "big":
    header = {"__metadata__": {"bench": "bench-local"},
              "big": {"dtype": "U8", "shape": [arg], "data_offsets": [0, arg]}}
    block = os.urandom(16 << 20)
    sizes = None
else:
    header, off = {}, 0
    for i in range(arg):
        header["model.layers.%d.mlp.weight" % i] = {"dtype": "F32", "shape": [16, 16], "data_offsets": [off, off + 1024]}
        off += 1024
    block = os.urandom(1024)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-(8 + len(h)) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    total = arg if kind == "big" else arg * 1024
    while total > 0:
        chunk = block[:min(len(block), total)]
        f.write(chunk)
        total -= len(chunk)
print(8 + len(h))
PY
}

# --- measuring -------------------------------------------------------------
now_ns() { date +%s%N; }

# Reads COUNT bytes of FILE from byte SKIP with dd bs=1M; prints GB/s.
read_gbps() {  # file skip count
  local t0 t1
  t0=$(now_ns)
  dd if="$1" of=/dev/null bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none
  t1=$(now_ns)
  awk -v b="$3" -v ns="$((t1 - t0))" 'BEGIN { printf "%.2f\n", b / ns }'
}

# Prints "median best" of the numbers on stdin (best = largest).
median_best() {
  sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", m, v[NR] }'
}

# Prints "median best" of the numbers on stdin (best = smallest).
median_min() {
  sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[1] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# Prints the pid of the stfs daemon serving mount point $1.
daemon_pid() {
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -qxF -- "$1"; then
      [[ "$(readlink "$p/exe" 2>/dev/null)" == "$(readlink -f "$STFS")" ]] && { echo "${p#/proc/}"; return; }
    fi
  done
}

mount_count=0
# Mounts $1 with options $2 (may be empty); sets MNT.
do_mount() {
  MNT="$WORK/m$((mount_count++))"
  mkdir -p "$MNT"
  MOUNTS+=("$MNT")
  if [[ -n "$2" ]]; then "$STFS" -o "$2" "$1" "$MNT"; else "$STFS" "$1" "$MNT"; fi
}
do_unmount() { fusermount3 -u "$1"; rmdir "$1"; }

bdi_readahead() {  # mountpoint
  local dev
  dev=$(awk -v m="$1" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
  cat "/sys/class/bdi/$dev/read_ahead_kb" 2>/dev/null || echo "?"
}

# --- headers mode ------------------------------------------------------------
# Writes a header-test file (data buffer sparse) and prints its header size:
# tensors N | metadata N | limit BYTES (tensors, padded to BYTES) | nested BYTES.
make_header_file() {  # kind path arg
  python3 - "$@" <<'PY'
import struct, sys
kind, path, arg = sys.argv[1], sys.argv[2], int(sys.argv[3])
entry = '"model.layers.%d.mlp.experts.%d.weight":{"dtype":"U8","shape":[16,64],"data_offsets":[%d,%d]}'
parts, data = [], 0
if kind in ("tensors", "limit"):
    size = 2
    for i in range(arg if kind == "tensors" else 1 << 40):
        e = entry % (i // 64, i % 64, data, data + 1024)
        if kind == "limit" and size + len(e) + 1 > arg:
            break
        parts.append(e); size += len(e) + 1; data += 1024
    h = "{" + ",".join(parts) + "}"
    if kind == "limit":
        h += " " * (arg - len(h))
elif kind == "metadata":
    h = '{"__metadata__":{' + ",".join('"key.%d":"value %d"' % (i, i) for i in range(arg)) + "}}"
else:
    h = '{"__metadata__":{"k":' + "[" * (arg // 2) + "]" * (arg // 2) + "}}"
hb = h.encode()
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    f.truncate(8 + len(hb) + data)
print(len(hb))
PY
}

# Prints python3's json.loads time of a file's header in seconds.
python_parse_s() {
  python3 - "$1" <<'PY'
import json, sys, time
b = open(sys.argv[1], "rb").read()
h = b[8:8 + int.from_bytes(b[:8], "little")]
t = time.perf_counter()
try:
    json.loads(h)
except (ValueError, RecursionError):
    pass
print("%.3f" % (time.perf_counter() - t))
PY
}

run_headers() {
  local n="${STFS_BENCH_HEADER_TENSORS:-100000}" parse_tool="$ROOT/build-bench/fuzz/stfs-parse-header"
  cmake --build "$ROOT/build-bench" -j2 --target stfs-parse-header >>"$ROOT/build-bench/bench-build.log" 2>&1 ||
    die "building stfs-parse-header failed; see build-bench/bench-build.log"
  echo "stfs header benchmark — $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM, $(python3 --version)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| header | bytes | stfs parse s | python json.loads s | ratio | peak RSS MiB | RSS / header | result |"
  echo "|---|---|---|---|---|---|---|---|"
  local kind arg file bytes line secs rss py
  for spec in "tensors $n" "metadata $n" "limit 100000000" "nested 10000000"; do
    read -r kind arg <<<"$spec"
    file="$WORK/$kind.safetensors"
    bytes=$(make_header_file "$kind" "$file" "$arg")
    line=$("$parse_tool" "$file" || true)
    secs=$(sed -E 's/.*(ok|refused) ([0-9.]+) s.*/\2/' <<<"$line")
    rss=$(sed -E 's/.*peak RSS ([0-9]+) KiB.*/\1/' <<<"$line")
    py=$(python_parse_s "$file")
    printf '| %s %s | %s | %s | %s | %s | %s | %s | %s |\n' "$kind" "$arg" "$bytes" "$secs" "$py" "$(ratio "$secs" "$py")" \
      "$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')" "$(awk -v k="$rss" -v b="$bytes" 'BEGIN { printf "%.2f", k * 1024 / b }')" \
      "$(sed -E 's/^[^:]*: (ok|refused).*/\1/' <<<"$line")"
    [[ "$kind" == tensors ]] || rm -f "$file"
  done
  echo
  local many="$WORK/tensors.safetensors" t0 t1 mount_s ls_s entries
  mkdir -p "$WORK/mnt"
  MOUNTS+=("$WORK/mnt")
  t0=$(now_ns)
  if timeout 600 "$STFS" "$many" "$WORK/mnt"; then
    t1=$(now_ns)
    mount_s=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
    t0=$(now_ns); entries=$(timeout 600 ls -lR "$WORK/mnt" | wc -l); t1=$(now_ns)
    ls_s=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }')
    fusermount3 -u "$WORK/mnt"
    echo "$n tensors: mount $mount_s s (target < 1 s), ls -lR $ls_s s (target < 5 s, $entries lines)"
  else
    echo "$n tensors: mount failed or took over 600 s"
  fi
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# --- run -----------------------------------------------------------------------
if [[ "$MODE" == headers ]]; then run_headers; exit 0; fi
SIZE=$((SIZE_MIB * 1024 * 1024))
BIG="$WORK/big.safetensors"
MANY="$WORK/many.safetensors"

echo "stfs local benchmark — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM, kernel $(uname -r), libfuse $(pkg-config --modversion fuse3 2>/dev/null || echo '?')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "stfs: $STFS; tensor: $SIZE_MIB MiB; trials: $TRIALS; reader: dd bs=1M"
echo

note "writing $SIZE_MIB MiB tensor to $BIG"
DATA_START=$(make_file big "$BIG" "$SIZE")
cat "$BIG" >/dev/null
cat "$BIG" >/dev/null

# A configuration: a label and its -o options. The first is the default.
DEFAULT="default (splice, readahead 4096 KiB)"
CONFIGS=("$DEFAULT|"
         "read_reply=pread|read_reply=pread"
         "readahead_kb=128|readahead_kb=128"
         "readahead_kb=1024|readahead_kb=1024")
# More, from the environment: "label|opts;label|opts".
if [[ -n "${STFS_BENCH_EXTRA:-}" ]]; then
  IFS=';' read -r -a extra <<<"$STFS_BENCH_EXTRA"
  CONFIGS+=("${extra[@]}")
fi

# Other agents share this machine, so load changes from second to second:
# every mount read is paired with a direct read taken right before it, and
# ratios are medians of those pairs. Configurations take turns in each trial.
declare -A FIRST FIRST_RATIO RA
direct=() repeat=() repeat_ratio=()
peak_rss_kb=0 rss_default_kb=0 checked=0
for ((i = 0; i < TRIALS; i++)); do
  for cfg in "${CONFIGS[@]}"; do
    label="${cfg%%|*}"
    opts="${cfg#*|}"
    do_mount "$BIG" "$opts"
    RA["$label"]=$(bdi_readahead "$MNT")
    d=$(read_gbps "$BIG" "$DATA_START" "$SIZE")
    f=$(read_gbps "$MNT/big/data" 0 "$SIZE")
    direct+=("$d")
    FIRST["$label"]+="$f "
    FIRST_RATIO["$label"]+="$(ratio "$f" "$d") "
    pid=$(daemon_pid "$MNT")
    if [[ -n "$pid" ]]; then
      hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
      if ((hwm > peak_rss_kb)); then peak_rss_kb=$hwm; fi
      if [[ -z "$opts" ]] && ((hwm > rss_default_kb)); then rss_default_kb=$hwm; fi
    fi
    if [[ -z "$opts" ]]; then
      for ((j = 0; j < 2; j++)); do
        d=$(read_gbps "$BIG" "$DATA_START" "$SIZE")
        r=$(read_gbps "$MNT/big/data" 0 "$SIZE")
        direct+=("$d")
        repeat+=("$r")
        repeat_ratio+=("$(ratio "$r" "$d")")
      done
      if ((checked == 0)); then  # the bytes are right: the first, a middle and the last MiB
        for off in 0 $((SIZE / 2 + 12345)) $((SIZE - 1048576)); do
          cmp -s <(dd if="$BIG" bs=1M iflag=skip_bytes,count_bytes skip=$((DATA_START + off)) count=1048576 status=none) \
                 <(dd if="$MNT/big/data" bs=1M iflag=skip_bytes,count_bytes skip=$off count=1048576 status=none) ||
            die "bytes through the mount differ from the file at offset $off"
        done
        checked=1
      fi
    fi
    do_unmount "$MNT"
  done
done

note "writing $TENSORS-tensor file"
make_file many "$MANY" "$TENSORS" >/dev/null
cat "$MANY" >/dev/null
mount_s=() ls_cold_s=() ls_warm_s=()
for ((i = 0; i < TRIALS; i++)); do
  t0=$(now_ns); do_mount "$MANY" ""; t1=$(now_ns)
  mount_s+=("$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.4f\n", ns / 1e9 }')")
  t0=$(now_ns); lines=$(ls -lR "$MNT" | wc -l); t1=$(now_ns)
  ls_cold_s+=("$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.4f\n", ns / 1e9 }')")
  t0=$(now_ns); ls -lR "$MNT" >/dev/null; t1=$(now_ns)
  ls_warm_s+=("$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.4f\n", ns / 1e9 }')")
  entries=$(find "$MNT" -mindepth 1 | wc -l)
  do_unmount "$MNT"
done
((entries == TENSORS * 4 + 2)) || die "the $TENSORS-tensor mount shows $entries entries, expected $((TENSORS * 4 + 2))"
read -r mount_med mount_min < <(printf '%s\n' "${mount_s[@]}" | median_min)
read -r lsc_med lsc_min < <(printf '%s\n' "${ls_cold_s[@]}" | median_min)
read -r lsw_med lsw_min < <(printf '%s\n' "${ls_warm_s[@]}" | median_min)

mb() { printf '%s\n' $1 | median_best; }
read -r direct_med direct_best < <(mb "${direct[*]}")
read -r repeat_med repeat_best < <(mb "${repeat[*]}")
read -r repeat_rmed _ < <(mb "${repeat_ratio[*]}")
verdict() { awk -v v="$1" -v t="$2" -v dir="$3" 'BEGIN { ok = dir == "min" ? v >= t : v < t; print ok ? "met" : "MISSED" }'; }
rss_mib=$(awk -v k="$peak_rss_kb" 'BEGIN { printf "%.1f", k / 1024 }')

echo "## ${SIZE_MIB} MiB tensor: GB/s (median, best of $TRIALS+) and ratio to a direct read taken just before (median of pairs)"
row() { printf '| %-56s | %7s | %7s | %6s |\n' "$@"; }
row "read" "median" "best" "ratio"
echo "|----------------------------------------------------------|---------|---------|--------|"
row "direct from the source file (warm cache)" "$direct_med" "$direct_best" "1.00"
declare -A FMED FRAT
for cfg in "${CONFIGS[@]}"; do
  label="${cfg%%|*}"
  read -r med best < <(mb "${FIRST[$label]}")
  read -r rmed _ < <(mb "${FIRST_RATIO[$label]}")
  FMED["$label"]=$med
  FRAT["$label"]=$rmed
  row "mount, first read, $label" "$med" "$best" "$rmed"
done
row "mount, repeated read, default" "$repeat_med" "$repeat_best" "$repeat_rmed"
echo
echo "all trials (GB/s):"
echo "  direct: ${direct[*]}"
for cfg in "${CONFIGS[@]}"; do
  label="${cfg%%|*}"
  echo "  first, $label: ${FIRST[$label]}(bdi read_ahead_kb=${RA[$label]})"
done
echo "  repeated, default: ${repeat[*]}"
echo
best_ra="" best_ra_v=0
for label in "readahead_kb=128" "readahead_kb=1024" "$DEFAULT"; do
  if awk -v a="${FRAT[$label]}" -v b="$best_ra_v" 'BEGIN { exit !(a > b) }'; then best_ra="$label" best_ra_v=${FRAT[$label]}; fi
done
faster() { awk -v s="$1" -v p="$2" 'BEGIN { print (s >= p ? "splice" : "pread") }'; }
echo "read reply: splice ${FRAT[$DEFAULT]}x vs pread ${FRAT[read_reply=pread]}x of direct (first read) -> $(faster "${FRAT[$DEFAULT]}" "${FRAT[read_reply=pread]}") is faster"
echo "readahead: best first read with $best_ra (${best_ra_v}x of direct)"
echo "daemon peak RSS (VmHWM) after serving ${SIZE_MIB} MiB: ${rss_mib} MiB over all configurations, $(awk -v k="$rss_default_kb" 'BEGIN { printf "%.1f", k / 1024 }') MiB with the default"
echo

echo "## ${TENSORS} tensors ($((TENSORS * 4 + 2)) entries), seconds (median / best of $TRIALS)"
echo "mount (stfs returns once the mount answers): $mount_med / $mount_min"
echo "ls -lR, first (fresh mount): $lsc_med / $lsc_min ($lines lines)"
echo "ls -lR, again: $lsw_med / $lsw_min"
echo
echo "## targets"
echo "first read >= 0.25x direct: ${FRAT[$DEFAULT]} ($(verdict "${FRAT[$DEFAULT]}" 0.25 min))"
echo "repeated read >= 0.95x direct: $repeat_rmed ($(verdict "$repeat_rmed" 0.95 min))"
echo "daemon RSS < 64 MiB: $rss_mib MiB ($(verdict "$rss_mib" 64 max))"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
