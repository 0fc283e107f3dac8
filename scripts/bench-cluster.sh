#!/usr/bin/env bash
# bench-cluster.sh: a cluster job loading one sharded checkpoint from S3, in
# one run on this machine (issue 11 item 5).
#
# An s3rver (scripts/s3-test-server.sh, the tests' S3 server) serves a
# generated 8-shard checkpoint (index.json + 8 shards; 2-D BF16/F16/F32
# weights, one with odd dimensions, and 1-D F32/BF16/I32/U8 tensors) straight
# from its own store directory. NODES stfs daemons (one per "node", default 4)
# mount s3://models/model/, each signed with env credentials; node n reads
# parts/8/R[@D]/data of its ranks R (8/NODES of them) of every 2-D tensor and
# the whole of every 1-D tensor, all nodes at once. Reported per node and in
# all, for the row split (D=0) and the column split (D=1) separately:
#   - bytes fetched (sum of __stats__ bytes_fetched over the shards) against
#     the bytes of its parts (target <= 1.1x);
#   - total fetched against the model's tensor bytes (target <= 1.1x);
#   - wall time of the job against one mount reading the whole model;
# and, as the baseline users have today, each node fetching every shard whole
# with curl (all nodes at once). Every byte the nodes read is then compared
# with numpy's slice of the shard files (scripts/bench-cluster.py verify).
# One reader process per node; the machine's cores are shared by the server,
# the daemons and the readers, so wall times are ratios on this machine only.
#
# usage: scripts/bench-cluster.sh [--size 2G] [--nodes 4] [--dim 0|1|both]
#   --size     tensor bytes of the model (K/M/G suffixes; default 2G)
#   --nodes    1, 2, 4 or 8 mounts (default 4)
#   --dim      split dimension(s) to run (default both)
#   STFS_BIN=path/to/stfs   use this binary instead of building build-bench-remote/
#   STFS_BENCH_OPTS=...     extra -o options for every mount
#   TMPDIR=/tmp             where the temp dir (model, mounts) goes
# Needs node/npm (s3rver), curl >= 7.75 (--aws-sigv4), python3 with numpy,
# /dev/fuse. Never writes outside its temp dir; unmounts everything and stops
# s3rver on exit.
set -euo pipefail

SIZE_TEXT=2G NODES=4 DIMS="0 1"
while (($#)); do
  case "$1" in
    --size) SIZE_TEXT="$2"; shift 2 ;;
    --nodes) NODES="$2"; shift 2 ;;
    --dim) DIMS="$2"; [[ "$DIMS" == both ]] && DIMS="0 1"; shift 2 ;;
    *) sed -n '/^# usage/,/^# s3rver/p' "$0" >&2; exit 1 ;;
  esac
done
EXTRA_OPTS="${STFS_BENCH_OPTS:-}"

# shellcheck source=scripts/bench-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_init bench-cluster
bench_require curl python3 fusermount3 awk
case "$NODES" in 1 | 2 | 4 | 8) ;; *) die "--nodes must be 1, 2, 4 or 8 (8 ranks)" ;; esac
for d in $DIMS; do [[ "$d" == 0 || "$d" == 1 ]] || die "--dim must be 0, 1 or both"; done
SIZE=$(awk -v t="$SIZE_TEXT" 'BEGIN { n = t + 0; u = toupper(substr(t, length(n "") + 1));
  m = (u ~ /^G/) ? 2^30 : (u ~ /^M/) ? 2^20 : (u ~ /^K/) ? 2^10 : 1; printf "%d", n * m }')
((SIZE >= 8 << 20)) || die "--size must be at least 8M"
# pyenv and the like may shadow the python3 that has numpy (scripts/setup.sh: python3-numpy).
PYTHON=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' 2>/dev/null; then PYTHON="$p"; break; fi
done
[[ -n "$PYTHON" ]] || die "no python3 with numpy (run scripts/setup.sh)"
S3RVER=$("$ROOT/scripts/s3-test-server.sh" install) || die "s3rver unavailable (node/npm needed)"
bench_build_stfs "$ROOT/build-bench-remote" -DSTFS_BUILD_CUDA=OFF -DSTFS_BUILD_REMOTE=ON
bench_workdir stfs-bench-cluster $((SIZE * 11 / 10 / 1048576 + 256))

HELPER=("$PYTHON" "$ROOT/scripts/bench-cluster.py")
OBJECTS="$WORK/s3/models/model"  # s3rver's store: bucket "models", prefix "model/"
note "generating a $SIZE_TEXT model in $OBJECTS"
MODEL_BYTES=$("${HELPER[@]}" generate "$OBJECTS" "$SIZE")

PORT=$(bench_free_port)
"$ROOT/scripts/s3-test-server.sh" start "$WORK/s3" "$PORT" >"$WORK/s3rver.log" 2>&1 &
BENCH_SERVER_PIDS+=("$!")
ENDPOINT="http://127.0.0.1:$PORT"
# s3rver accepts any secret for its key S3RVER; the requests are signed all the same.
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
SIGNED=(--aws-sigv4 aws:amz:us-east-1:s3 -u S3RVER:S3RVER -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
for _ in $(seq 300); do
  curl -sf -o /dev/null "${SIGNED[@]}" "$ENDPOINT/models/model/model.safetensors.index.json" && break
  sleep 0.05
done
curl -sf -o /dev/null "${SIGNED[@]}" "$ENDPOINT/models/model/model.safetensors.index.json" ||
  die "s3rver did not serve the model: $(tail -3 "$WORK/s3rver.log")"

now_ns() { date +%s%N; }
secs() { awk -v ns="$1" 'BEGIN { printf "%.2f", ns / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
mount_count=0
do_mount() {  # sets MNT: a fresh mount of the model's prefix
  MNT="$WORK/m$((mount_count++))"
  mkdir -p "$MNT"
  MOUNTS+=("$MNT")
  "$STFS" -o "endpoint=$ENDPOINT${EXTRA_OPTS:+,$EXTRA_OPTS}" s3://models/model/ "$MNT"
}
do_unmount() { fusermount3 -u "$1"; rmdir "$1"; }
source_sum() {  # mnt field: the field summed over the shards' stats
  "$PYTHON" -c 'import json, sys
s = json.load(open(sys.argv[1]))["source"]
print(sum(x[sys.argv[2]] for x in (s if isinstance(s, list) else [s])))' "$1/__stats__" "$2"
}
ranks_of() { seq -s, $(($1 * 8 / NODES)) $((($1 + 1) * 8 / NODES - 1)); }

echo "stfs cluster benchmark — $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM; s3rver $("$S3RVER" --version 2>/dev/null || echo '?') (node $(node --version)) on 127.0.0.1"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: 8 shards, $MODEL_BYTES bytes of tensors ($(mib "$MODEL_BYTES") MiB); $NODES nodes, 8 ranks; extra -o: ${EXTRA_OPTS:-none}"
echo

# --- baseline: every node fetches every shard whole with curl --------------------------------
note "baseline: $NODES nodes curl the 8 shards at once"
shards=$(cd "$OBJECTS" && ls -- *.safetensors._S3rver_object | sed 's/\._S3rver_object$//')
t0=$(now_ns)
pids=()
for ((n = 0; n < NODES; n++)); do
  (
    s0=$(now_ns) got=0
    for key in $shards; do
      got=$((got + $(curl -sf -o /dev/null -w '%{size_download}' "${SIGNED[@]}" "$ENDPOINT/models/model/$key")))
    done
    echo "$got $(($(now_ns) - s0))" >"$WORK/curl.$n"
  ) &
  pids+=("$!")
done
wait "${pids[@]}"  # not s3rver
CURL_WALL=$(($(now_ns) - t0))

# --- one mount reading the whole model --------------------------------------------------------
note "one mount reads every tensor's data"
do_mount
t0=$(now_ns)
"${HELPER[@]}" read "$OBJECTS" "$MNT" 0 1 whole >/dev/null
WHOLE_WALL=$(($(now_ns) - t0))
WHOLE_FETCHED=$(source_sum "$MNT" bytes_fetched)
do_unmount "$MNT"

echo "one mount reading the whole model: $(secs "$WHOLE_WALL") s, fetched $(ratio "$WHOLE_FETCHED" "$MODEL_BYTES")x the model"
echo
echo "baseline, each node curls the 8 shards (all nodes at once): wall $(secs "$CURL_WALL") s"
echo "| node | bytes of its parts (D=${DIMS%% *}) | bytes fetched | fetched / parts | time s |"
echo "|---|---|---|---|---|"
curl_total=0
for ((n = 0; n < NODES; n++)); do
  read -r got ns <"$WORK/curl.$n"
  need=$("${HELPER[@]}" size "$OBJECTS" "$n" "$NODES" "${DIMS%% *}")
  curl_total=$((curl_total + got))
  echo "| $n (ranks $(ranks_of "$n")) | $need | $got | $(ratio "$got" "$need") | $(secs "$ns") |"
done
echo "| all | $MODEL_BYTES (model) | $curl_total | $(ratio "$curl_total" "$MODEL_BYTES") x model | wall $(secs "$CURL_WALL"), $(ratio "$CURL_WALL" "$WHOLE_WALL") x one mount whole |"

# --- the cluster job, per split dimension --------------------------------------------------
failed=0
for D in $DIMS; do
  note "D=$D: $NODES mounts read their parts at once"
  nodes_mnt=()
  for ((n = 0; n < NODES; n++)); do do_mount; nodes_mnt+=("$MNT"); done
  t0=$(now_ns) pids=()
  for ((n = 0; n < NODES; n++)); do
    (
      s0=$(now_ns)
      got=$("${HELPER[@]}" read "$OBJECTS" "${nodes_mnt[$n]}" "$n" "$NODES" "$D")
      echo "$got $(($(now_ns) - s0))" >"$WORK/read.$D.$n"
    ) &
    pids+=("$!")
  done
  wait "${pids[@]}"
  wall=$(($(now_ns) - t0))
  echo
  part_name="parts/8/R"; ((D == 0)) || part_name="parts/8/R@$D"
  echo "D=$D: each node reads $part_name of its ranks of every 2-D tensor and every 1-D tensor whole (all nodes at once): wall $(secs "$wall") s"
  echo "| node | bytes of its parts | bytes fetched | fetched / parts | requests | time s | bytes checked |"
  echo "|---|---|---|---|---|---|---|"
  total_fetched=0 total_parts=0
  for ((n = 0; n < NODES; n++)); do
    read -r got ns <"$WORK/read.$D.$n"
    need=$("${HELPER[@]}" size "$OBJECTS" "$n" "$NODES" "$D")
    [[ "$got" == "$need" ]] || { echo "node $n read $got bytes, expected $need"; failed=1; }
    fetched=$(source_sum "${nodes_mnt[$n]}" bytes_fetched)
    requests=$(source_sum "${nodes_mnt[$n]}" requests)
    # The check reads through the mount again: after the figures above.
    check=$("${HELPER[@]}" verify "$OBJECTS" "${nodes_mnt[$n]}" "$n" "$NODES" "$D") || { failed=1; echo "$check"; }
    total_fetched=$((total_fetched + fetched)) total_parts=$((total_parts + need))
    echo "| $n (ranks $(ranks_of "$n")) | $need | $fetched | $(ratio "$fetched" "$need") | $requests | $(secs "$ns") | ${check##* } |"
  done
  echo "| all | $total_parts (model $MODEL_BYTES) | $total_fetched | $(ratio "$total_fetched" "$MODEL_BYTES") x model | | wall $(secs "$wall"), $(ratio "$wall" "$WHOLE_WALL") x one mount whole, $(ratio "$wall" "$CURL_WALL") x curl baseline | |"
  for m in "${nodes_mnt[@]}"; do do_unmount "$m"; done
done
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
((failed == 0)) || die "bytes differ from the source (see above)"
echo "every byte read by the nodes equals numpy's slice of the source shards"
