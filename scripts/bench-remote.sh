#!/usr/bin/env bash
# bench-remote.sh: how fast a remote safetensors object reads through an stfs
# mount, against curl fetching the same bytes from the same local nginx, in
# one run on this machine.
#
#   1. sequential: a 2 GiB tensor read once through a fresh mount (dd bs=1M)
#      vs `curl -r A-B` of the same byte range (both to /dev/null), as GB/s
#      and their ratio; then the same data read again through the mount
#      (cached) vs the same bytes read from the local file (warm page cache);
#   2. bytes fetched from the server vs bytes read, from __stats__;
#   3. parallel: 4 readers (dd) of 4 different tensors through a fresh mount
#      vs 4 parallel curls of the same ranges, aggregate GB/s and ratio;
#   4. CPU seconds per GiB of each process (curl; nginx; stfs, dd), from
#      rusage and /proc/PID/stat: on a small machine where server, client and
#      daemon share the cores, CPU per byte is what sets the speed; and the
#      daemon's minor page faults per GiB (fresh memory it touched);
#   5. random: 1 MiB preads at random offsets in the tensor on a fresh mount,
#      as MB/s, with bytes fetched vs bytes read, for the default block size
#      and for -o block_size=1M, each with and without posix_fadvise(RANDOM)
#      (which turns off the kernel's own read-ahead).
#
# Each mount read is paired with a curl (or local) read just before it, as
# the load on a shared machine changes from second to second; ratios are
# medians over STFS_BENCH_TRIALS rounds (default 3). Needs nginx (run
# scripts/setup.sh), curl, python3 and /dev/fuse. Never writes outside its
# temp dir; stops nginx and unmounts everything on exit.
#
# usage: scripts/bench-remote.sh           (environment knobs below)
#   STFS_BIN=path/to/stfs     use this binary instead of building build-bench-remote/
#   STFS_BENCH_MIB=2048       tensor size in MiB
#   STFS_BENCH_PARALLEL_MIB=512  size of each of the 4 tensors read in parallel
#   STFS_BENCH_TRIALS=3       rounds
#   STFS_BENCH_RANDOM=256     random 1 MiB reads per round
#   STFS_BENCH_OPTS=...       extra -o options for every mount (e.g. connections=8)
#   TMPDIR=/tmp               where the temp dir goes
set -euo pipefail
# `scripts/bench-remote.sh checkpoints`: rank parts and sharded-index mounts (local and HTTP).
[[ "${1:-}" == checkpoints ]] && exec "$(dirname "${BASH_SOURCE[0]}")/bench-checkpoints.sh"

SIZE_MIB="${STFS_BENCH_MIB:-2048}"
PAR_MIB="${STFS_BENCH_PARALLEL_MIB:-512}"
TRIALS="${STFS_BENCH_TRIALS:-3}"
RANDOM_READS="${STFS_BENCH_RANDOM:-256}"
EXTRA_OPTS="${STFS_BENCH_OPTS:-}"

# shellcheck source=scripts/bench-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-remote
bench_require curl python3 dd fusermount3 awk sort
bench_build_stfs "$ROOT/build-bench-remote" -DSTFS_BUILD_CUDA=OFF -DSTFS_BUILD_REMOTE=ON

bench_workdir stfs-bench-remote $((SIZE_MIB + 4 * PAR_MIB + 64))
mkdir -p "$WORK/www"
bench_nginx_start "$WORK/www"

# --- the file ----------------------------------------------------------------------
# One small tensor, then "big" (SIZE bytes of non-zero pseudo-random data, a
# 16 MiB block of urandom repeated), then p0..p3 (PAR bytes each, right after
# big). Prints the file offset of big's first byte.
make_file() {  # path size par
  python3 - "$@" <<'PY'
import json, os, struct, sys
path, size, par = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = {"__metadata__": {"bench": "bench-remote"},
          "small": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]},
          "big": {"dtype": "U8", "shape": [size], "data_offsets": [4000, 4000 + size]}}
for i in range(4):
    first = 4000 + size + i * par
    header["p%d" % i] = {"dtype": "U8", "shape": [par], "data_offsets": [first, first + par]}
total = size + 4 * par
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-(8 + len(h)) % 8)
block = os.urandom(16 << 20)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.write(os.urandom(4000))
    left = total
    while left > 0:
        chunk = block[:min(len(block), left)]
        f.write(chunk)
        left -= len(chunk)
print(8 + len(h) + 4000)
PY
}

# --- measuring -----------------------------------------------------------------------
now_ns() { date +%s%N; }
gbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.3f\n", b / ns }'; }

# Reads COUNT bytes of FILE from byte SKIP with dd bs=1M; prints GB/s.
dd_gbps() {  # file skip count
  local t0 t1
  t0=$(now_ns)
  dd if="$1" of=/dev/null bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none
  t1=$(now_ns)
  gbps "$3" "$((t1 - t0))"
}

# Runs each COMMAND (a bash command line) at once, in parallel, and waits
# for all; prints "GB/s CPU PID_CPU..." where GB/s is TOTAL bytes over the
# wall time, CPU the commands' own CPU seconds (rusage) and PID_CPU the CPU
# seconds each process of PIDS (comma-separated) used meanwhile. A command
# that prints something must print EXPECT (curl's size_download).
run_measured() {  # total pids expect command...
  python3 - "$@" <<'PY'
import os, subprocess, sys, time
total, pids, expect, cmds = int(sys.argv[1]), [p for p in sys.argv[2].split(",") if p], sys.argv[3], sys.argv[4:]
tick = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick
before = [cpu(p) for p in pids]
t0 = time.monotonic()
procs = [subprocess.Popen(["bash", "-c", c], stdout=subprocess.PIPE) for c in cmds]
outs = [p.communicate()[0].decode().strip() for p in procs]
t1 = time.monotonic()
after = [cpu(p) for p in pids]
usage = os.times()
if any(p.returncode != 0 for p in procs):
    sys.exit("a command failed: %s" % cmds)
for out in outs:
    if out and out != expect:
        sys.exit("fetched %s bytes, expected %s" % (out, expect))
print("%.3f %.2f %s" % (total / (t1 - t0) / 1e9, usage.children_user + usage.children_system,
                        " ".join("%.2f" % (a - b) for a, b in zip(after, before))))
PY
}

# Prints the pid of the stfs daemon serving mount point MNT.
daemon_pid() {  # mnt
  local pid
  for pid in $(pgrep -x stfs); do
    if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$1"; then
      echo "$pid"
      return
    fi
  done
  die "no stfs process serves $1"
}
# Minor page faults of process PID so far (/proc/PID/stat field 10): fresh
# memory the daemon touches, which costs more than copying on a VM.
minor_faults() { awk '{ print $10 }' "/proc/$1/stat"; }
per_gib() { awk -v s="$1" -v b="$2" 'BEGIN { printf "%.2f\n", s * 1073741824 / b }'; }

median() { sort -g | awk '{ v[NR] = $1 } END { printf "%.3f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", (b > 0 ? a / b : 0) }'; }

# Prints field KEY of the "source" object in MNT/__stats__.
source_stat() {  # mnt key
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["source"][sys.argv[2]])' "$1/__stats__" "$2"
}

mount_count=0
# Mounts URL with -o OPTIONS (may be empty); sets MNT.
do_mount() {  # url options
  MNT="$WORK/m$((mount_count++))"
  mkdir -p "$MNT"
  MOUNTS+=("$MNT")
  local opts="$2"
  [[ -n "$EXTRA_OPTS" ]] && opts="${opts:+$opts,}$EXTRA_OPTS"
  if [[ -n "$opts" ]]; then "$STFS" -o "$opts" "$1" "$MNT"; else "$STFS" "$1" "$MNT"; fi
}
do_unmount() { fusermount3 -u "$1"; rmdir "$1"; }

# Reads N random 1 MiB ranges of FILE (SIZE bytes), after
# posix_fadvise(RANDOM) when ADVISE is 1 (no kernel read-ahead); prints MB/s.
random_mbps() {  # file size n advise
  python3 - "$@" <<'PY'
import os, random, sys, time
path, size, n, advise = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
rng = random.Random(1234)
offsets = [rng.randrange(0, size - (1 << 20)) & ~4095 for _ in range(n)]
fd = os.open(path, os.O_RDONLY)
if advise:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
t0 = time.monotonic()
for off in offsets:
    if len(os.pread(fd, 1 << 20, off)) != 1 << 20:
        sys.exit("short read at %d" % off)
t1 = time.monotonic()
os.close(fd)
print("%.1f" % (n * (1 << 20) / (t1 - t0) / 1e6))
PY
}

# --- run ------------------------------------------------------------------------------------
SIZE=$((SIZE_MIB * 1024 * 1024))
FILE="$WORK/www/model.safetensors"
URL="$NGINX_URL/model.safetensors"

echo "stfs remote benchmark — $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM, kernel $(uname -r); $($NGINX -v 2>&1 | sed 's/.*: //') on 127.0.0.1; $(curl --version | head -1 | cut -d' ' -f1-2)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "stfs: $STFS; tensor: $SIZE_MIB MiB (parallel: 4 x $PAR_MIB MiB); trials: $TRIALS; reader: dd bs=1M; extra -o: ${EXTRA_OPTS:-none}"
echo

note "writing $SIZE_MIB MiB tensor and 4 of $PAR_MIB MiB to $FILE"
START=$(make_file "$FILE" "$SIZE" "$((PAR_MIB * 1024 * 1024))")
cat "$FILE" >/dev/null
cat "$FILE" >/dev/null

NGINX_PID="${BENCH_SERVER_PIDS[-1]}"
curl_cmd() { echo "curl -s -o /dev/null -w '%{size_download}' -r $1-$(($1 + $2 - 1)) '$URL'"; }  # first count
dd_cmd() { echo "dd if='$1' of=/dev/null bs=1M status=none"; }

curl_runs=() first_runs=() first_ratios=() local_runs=() repeat_runs=() repeat_ratios=() amplification=()
cpu_curl=() cpu_curl_nginx=() cpu_daemon=() cpu_dd=() cpu_mount_nginx=() faults_daemon=()
for ((i = 0; i < TRIALS; i++)); do
  note "trial $((i + 1))/$TRIALS: sequential"
  read -r c c_cpu c_nginx < <(run_measured "$SIZE" "$NGINX_PID" "$SIZE" "$(curl_cmd "$START" "$SIZE")")
  do_mount "$URL" ""
  dpid=$(daemon_pid "$MNT")
  faults0=$(minor_faults "$dpid")
  read -r f f_cpu f_daemon f_nginx < <(run_measured "$SIZE" "$dpid,$NGINX_PID" "" \
                                          "$(dd_cmd "$MNT/big/data")")
  faults_daemon+=("$(awk -v n="$(($(minor_faults "$dpid") - faults0))" -v b="$SIZE" 'BEGIN { printf "%.0f\n", n * 1073741824 / b }')")
  fetched=$(source_stat "$MNT" bytes_fetched)
  l=$(dd_gbps "$FILE" "$START" "$SIZE")
  r=$(dd_gbps "$MNT/big/data" 0 "$SIZE")
  do_unmount "$MNT"
  curl_runs+=("$c") first_runs+=("$f") local_runs+=("$l") repeat_runs+=("$r")
  first_ratios+=("$(ratio "$f" "$c")") repeat_ratios+=("$(ratio "$r" "$l")")
  amplification+=("$(ratio "$fetched" "$SIZE")")
  cpu_curl+=("$(per_gib "$c_cpu" "$SIZE")") cpu_curl_nginx+=("$(per_gib "$c_nginx" "$SIZE")")
  cpu_dd+=("$(per_gib "$f_cpu" "$SIZE")") cpu_daemon+=("$(per_gib "$f_daemon" "$SIZE")")
  cpu_mount_nginx+=("$(per_gib "$f_nginx" "$SIZE")")
  note "  curl $c GB/s, mount first $f GB/s, local $l GB/s, mount repeated $r GB/s, fetched/read $(ratio "$fetched" "$SIZE")"
  note "  CPU s: curl $c_cpu + nginx $c_nginx; stfs $f_daemon + dd $f_cpu + nginx $f_nginx"
  note "  stfs page faults per GiB: ${faults_daemon[-1]}"
done

PAR=$((PAR_MIB * 1024 * 1024))
par_curl_runs=() par_mount_runs=() par_ratios=() par_cpu_curl=() par_cpu_daemon=()
for ((i = 0; i < TRIALS; i++)); do
  note "trial $((i + 1))/$TRIALS: 4 readers of 4 tensors"
  cmds=()
  for k in 0 1 2 3; do cmds+=("$(curl_cmd "$((START + SIZE + k * PAR))" "$PAR")"); done
  read -r c c_cpu c_nginx < <(run_measured "$((4 * PAR))" "$NGINX_PID" "$PAR" "${cmds[@]}")
  do_mount "$URL" ""
  cmds=()
  for k in 0 1 2 3; do cmds+=("$(dd_cmd "$MNT/p$k/data")"); done
  read -r f f_cpu f_daemon f_nginx < <(run_measured "$((4 * PAR))" "$(daemon_pid "$MNT"),$NGINX_PID" "" "${cmds[@]}")
  do_unmount "$MNT"
  par_curl_runs+=("$c") par_mount_runs+=("$f") par_ratios+=("$(ratio "$f" "$c")")
  par_cpu_curl+=("$(per_gib "$(awk -v a="$c_cpu" -v b="$c_nginx" 'BEGIN { print a + b }')" "$((4 * PAR))")")
  par_cpu_daemon+=("$(per_gib "$(awk -v a="$f_cpu" -v b="$f_daemon" -v c="$f_nginx" 'BEGIN { print a + b + c }')" "$((4 * PAR))")")
  note "  4 curls $c GB/s, 4 mount readers $f GB/s"
done

# A random configuration: label | -o options | fadvise RANDOM (1) or not (0).
RANDOM_CONFIGS=("4 MiB blocks (default)||0" "block_size=1M|block_size=1M|0"
                "4 MiB blocks, fadvise RANDOM||1" "block_size=1M, fadvise RANDOM|block_size=1M|1")
declare -A RANDOM_MBPS RANDOM_AMP RANDOM_KAMP
for cfg in "${RANDOM_CONFIGS[@]}"; do
  IFS='|' read -r label opts advise <<<"$cfg"
  runs=() amps=() kamps=()
  for ((i = 0; i < TRIALS; i++)); do
    note "trial $((i + 1))/$TRIALS: random 1 MiB reads, $label"
    do_mount "$URL" "$opts"
    m=$(random_mbps "$MNT/big/data" "$SIZE" "$RANDOM_READS" "$advise")
    fetched=$(source_stat "$MNT" bytes_fetched)
    asked=$(source_stat "$MNT" bytes_read)
    do_unmount "$MNT"
    runs+=("$m")
    amps+=("$(ratio "$fetched" "$((RANDOM_READS * 1024 * 1024))")")
    kamps+=("$(ratio "$fetched" "$asked")")
  done
  RANDOM_MBPS["$label"]=$(printf '%s\n' "${runs[@]}" | median)
  RANDOM_AMP["$label"]=$(printf '%s\n' "${amps[@]}" | median)
  RANDOM_KAMP["$label"]=$(printf '%s\n' "${kamps[@]}" | median)
done

med() { printf '%s\n' "$@" | median; }
echo "sequential read of the $SIZE_MIB MiB tensor (medians of $TRIALS):"
printf '  %-44s %7s GB/s\n' "curl -r (same byte range, to /dev/null)" "$(med "${curl_runs[@]}")"
printf '  %-44s %7s GB/s   ratio vs curl %s\n' "mount, first read (fresh mount)" "$(med "${first_runs[@]}")" "$(med "${first_ratios[@]}")"
printf '  %-44s %7s\n' "  bytes fetched / bytes read" "$(med "${amplification[@]}")"
printf '  %-44s %7s GB/s\n' "local file, warm page cache" "$(med "${local_runs[@]}")"
printf '  %-44s %7s GB/s   ratio vs local %s\n' "mount, repeated read (cached)" "$(med "${repeat_runs[@]}")" "$(med "${repeat_ratios[@]}")"
echo "CPU seconds per GiB read, first sequential read (medians):"
printf '  %-44s %7s + nginx %s\n' "curl" "$(med "${cpu_curl[@]}")" "$(med "${cpu_curl_nginx[@]}")"
printf '  %-44s %7s + dd %s + nginx %s\n' "mount: stfs daemon" "$(med "${cpu_daemon[@]}")" \
  "$(med "${cpu_dd[@]}")" "$(med "${cpu_mount_nginx[@]}")"
printf '  %-44s %7.0f\n' "stfs daemon page faults per GiB (minflt)" "$(med "${faults_daemon[@]}")"
echo "4 readers of 4 tensors of $PAR_MIB MiB in parallel, aggregate (medians of $TRIALS):"
printf '  %-44s %7s GB/s   CPU s/GiB (all processes) %s\n' "4 parallel curls (same ranges)" \
  "$(med "${par_curl_runs[@]}")" "$(med "${par_cpu_curl[@]}")"
printf '  %-44s %7s GB/s   CPU s/GiB (all processes) %s   ratio vs curl %s\n' "4 dd through a fresh mount" \
  "$(med "${par_mount_runs[@]}")" "$(med "${par_cpu_daemon[@]}")" "$(med "${par_ratios[@]}")"
echo "random 1 MiB preads ($RANDOM_READS per trial, fresh mount each); fetched / read by the"
echo "reader, and fetched / asked of stfs by the kernel (which adds its own read-ahead):"
for cfg in "${RANDOM_CONFIGS[@]}"; do
  label="${cfg%%|*}"
  printf '  %-44s %7s MB/s   fetched/read %s   fetched/asked %s\n' "$label" "${RANDOM_MBPS[$label]}" \
    "${RANDOM_AMP[$label]}" "${RANDOM_KAMP[$label]}"
done
echo "per-trial first-read ratios: ${first_ratios[*]}; repeated: ${repeat_ratios[*]}; parallel: ${par_ratios[*]}"
