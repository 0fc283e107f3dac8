# bench-lib.sh: what every scripts/bench-*.sh shares, sourced, never run.
#
# bench_init NAME                 die()/note() that name the benchmark
# bench_require TOOL...           die unless each tool is on PATH
# bench_build_stfs DIR CMAKE_ARG...  sets STFS: $STFS_BIN, or a Release build of
#                                 the stfs target in DIR (log in DIR/bench-build.log)
# bench_workdir PREFIX NEED_MIB   sets WORK (a temp dir with NEED_MIB free) and
#                                 MOUNTS (register mount points there); on exit
#                                 unmounts them, calls bench_cleanup_hook if
#                                 defined, and removes WORK
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

bench_init() {
  BENCH_NAME="$1"
  die() { echo "$BENCH_NAME: $*" >&2; exit 1; }
  note() { echo "# $*" >&2; }
}

bench_require() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
  done
}

bench_build_stfs() {
  local build="$1"
  shift
  STFS="${STFS_BIN:-}"
  if [[ -z "$STFS" ]]; then
    note "building stfs in $build"
    mkdir -p "$build"
    { cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTFS_BUILD_TESTS=OFF "$@" &&
      cmake --build "$build" -j2 --target stfs; } >"$build/bench-build.log" 2>&1 ||
      die "build failed; see $build/bench-build.log"
    STFS="$build/fs/stfs"
  fi
  [[ -x "$STFS" ]] || die "no stfs binary at $STFS"
}

bench_cleanup() {
  local m
  for m in "${MOUNTS[@]}"; do
    if mountpoint -q "$m" 2>/dev/null; then
      fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true
    fi
  done
  if declare -F bench_cleanup_hook >/dev/null; then bench_cleanup_hook; fi
  rm -rf "$WORK"
}

bench_workdir() {
  local prefix="$1" need_mib="$2" avail_mib
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")"
  MOUNTS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  avail_mib=$(df --output=avail -BM "$WORK" | tail -1 | tr -dc 0-9)
  ((avail_mib >= need_mib)) || die "$WORK has ${avail_mib} MiB free, need ${need_mib} MiB (set TMPDIR)"
}
