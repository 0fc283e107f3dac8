#!/usr/bin/env bash
# bench-listing.sh: the first `ls -lR` of a fresh mount of a file with many
# tensors (docs/PERFORMANCE.md, target < 5 s for 100,000 tensors), against
# `ls -lR` of a local directory tree of the same shape, in one run.
#
# The baseline tree is made from the mount itself (same names, same file
# sizes, on the work dir's filesystem) and listed warm, just before each
# mount's listing, so both see the machine's load of that moment; ratios
# are medians of those pairs. Besides wall time it reports CPU seconds:
# `ls`'s own (user + system, which includes the kernel's work of making
# each entry's inode and dentry) and the daemon's, since on a loaded
# machine CPU moves less than wall time. One more mount runs with -d and
# counts the FUSE requests of a first listing by kind, which gives requests
# per directory and the daemon's CPU per request.
#
# usage: scripts/bench-listing.sh          (environment knobs below)
#   STFS_BIN=path/to/stfs        use this binary instead of building build-bench/
#   STFS_BENCH_TENSORS=100000    tensors in the file
#   STFS_BENCH_TRIALS=3          fresh mounts per configuration
#   STFS_BENCH_EXTRA="label|opt=v,opt=v[|cpu];..."  more configurations: -o
#                                lists, and optionally one CPU that the daemon and
#                                ls are both pinned to (taskset), e.g.
#                                "threads=1|threads=1;one CPU||0"
#   TMPDIR=/tmp                  where the temp dir goes (needs ~1 GiB)
set -euo pipefail
TENSORS="${STFS_BENCH_TENSORS:-100000}"
TRIALS="${STFS_BENCH_TRIALS:-3}"

# shellcheck source=scripts/bench-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-listing
bench_require python3 fusermount3 awk sort /usr/bin/time
bench_build_stfs "$ROOT/build-bench" -DSTFS_BUILD_CUDA=OFF -DSTFS_BUILD_REMOTE=OFF
bench_workdir stfs-listing 1024

FILE="$WORK/many.safetensors"
MNT="$WORK/mnt"
LOCAL="$WORK/local"
mkdir -p "$MNT"
MOUNTS+=("$MNT")

# TENSORS U8 [4,4] tensors named like a mixture-of-experts checkpoint.
python3 - "$FILE" "$TENSORS" <<'PY'
import json, struct, sys
path, count = sys.argv[1], int(sys.argv[2])
header = {"layers.%d.experts.%d.w" % (i // 64, i % 64): {"dtype": "U8", "shape": [4, 4], "data_offsets": [16 * i, 16 * i + 16]}
          for i in range(count)}
raw = json.dumps(header, separators=(",", ":")).encode()
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(raw)) + raw)
    f.truncate(8 + len(raw) + 16 * count)
PY

DAEMON_PID=""
PIN=()  # a taskset prefix for the daemon and ls, or nothing
mount_fresh() {  # [stfs args...]: mounts FILE at MNT in the foreground; sets DAEMON_PID
  "${PIN[@]}" "$STFS" -f "$@" "$FILE" "$MNT" 2>"$WORK/daemon.log" &
  DAEMON_PID=$!
  local i
  for ((i = 0; i < 600; i++)); do
    [[ "$(stat -c %i "$MNT" 2>/dev/null)" == 1 ]] && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || die "stfs exited: $(tail -3 "$WORK/daemon.log")"
    sleep 0.05
  done
  die "the mount did not answer within 30 s"
}
unmount() {
  fusermount3 -u "$MNT"
  wait "$DAEMON_PID" || true
}
daemon_cpu_s() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$DAEMON_PID/stat"; }
# Prints "wall user sys" of `ls -lR DIR` (output discarded).
timed_ls() { /usr/bin/time -f "%e %U %S" "${PIN[@]}" ls -lR "$1" 2>&1 >/dev/null | tail -1; }

# The baseline: a local tree with the mount's names and sizes.
mount_fresh
python3 - "$MNT" "$LOCAL" <<'PY'
import os, sys
src, dst = sys.argv[1], sys.argv[2]
for here, dirs, files in os.walk(src):
    out = os.path.join(dst, os.path.relpath(here, src))
    os.makedirs(out, exist_ok=True)
    for name in files:
        fd = os.open(os.path.join(out, name), os.O_CREAT | os.O_WRONLY, 0o444)
        os.ftruncate(fd, os.stat(os.path.join(here, name)).st_size)
        os.close(fd)
PY
unmount
ls -lR "$LOCAL" >/dev/null  # warm

echo "stfs listing benchmark — $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), kernel $(uname -r), libfuse $(pkg-config --modversion fuse3 2>/dev/null || echo '?')"
echo "$TENSORS tensors: $(find "$LOCAL" | wc -l) entries in the local tree; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# Requests of one first listing, by kind (-d trace).
mount_fresh -d
cpu0=$(daemon_cpu_s)
ls -lR "$MNT" >/dev/null
cpu1=$(daemon_cpu_s)
unmount
opcodes=$(grep -oE 'opcode: [A-Z_]+' "$WORK/daemon.log" | awk '{print $2}' | sort | uniq -c | sort -rn)
requests=$(awk '{ n += $1 } END { print n }' <<<"$opcodes")
dirs=$(find "$LOCAL" -type d | wc -l)
echo "FUSE requests of a first ls -lR (-d trace): $requests for $dirs directories ($(awk -v r="$requests" -v d="$dirs" 'BEGIN { printf "%.2f", r / d }') per directory)"
awk '{ printf "  %-12s %s\n", $2, $1 }' <<<"$opcodes"
echo

CONFIGS=("default|")
if [[ -n "${STFS_BENCH_EXTRA:-}" ]]; then IFS=';' read -r -a extra <<<"$STFS_BENCH_EXTRA"; CONFIGS+=("${extra[@]}"); fi
bench_require taskset

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "| configuration | local ls -lR s | first ls -lR s | first / local | ls CPU s (local / first) | daemon CPU s | daemon µs per request | again s | again / local |"
echo "|---|---|---|---|---|---|---|---|---|"
for config in "${CONFIGS[@]}"; do
  IFS='|' read -r label opts cpu <<<"$config"
  args=()
  PIN=()
  [[ -n "$cpu" ]] && PIN=(taskset -c "$cpu")
  [[ -n "$opts" ]] && args=(-o "$opts")
  rows=()
  for ((t = 0; t < TRIALS; t++)); do
    read -r local_s local_u local_k <<<"$(timed_ls "$LOCAL")"
    mount_fresh "${args[@]}"
    c0=$(daemon_cpu_s)
    read -r first_s first_u first_k <<<"$(timed_ls "$MNT")"
    c1=$(daemon_cpu_s)
    read -r again_s _ _ <<<"$(timed_ls "$MNT")"
    unmount
    rows+=("$local_s $first_s $(awk -v a="$first_s" -v b="$local_s" 'BEGIN { print a / b }') \
$(awk -v u="$local_u" -v k="$local_k" 'BEGIN { print u + k }') $(awk -v u="$first_u" -v k="$first_k" 'BEGIN { print u + k }') \
$(awk -v a="$c1" -v b="$c0" 'BEGIN { print a - b }') $again_s $(awk -v a="$again_s" -v b="$local_s" 'BEGIN { print a / b }')")
  done
  col() { printf '%s\n' "${rows[@]}" | awk -v c="$1" '{ print $c }' | median; }
  daemon=$(col 6)
  printf '| %s | %.2f | %.2f | **%.2f** | %.2f / %.2f | %.2f | %.1f | %.2f | %.2f |\n' "$label" "$(col 1)" "$(col 2)" "$(col 3)" \
    "$(col 4)" "$(col 5)" "$daemon" "$(awk -v d="$daemon" -v r="$requests" 'BEGIN { print d * 1e6 / r }')" "$(col 7)" "$(col 8)"
done
echo
echo "Medians of $TRIALS fresh mounts per configuration; each listing paired with a local one just before it."
echo "Daemon CPU of the -d run's first listing (tracing included): $(awk -v a="$cpu1" -v b="$cpu0" 'BEGIN { printf "%.2f", a - b }') s."
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
