# bench-lib.sh: what every scripts/bench-*.sh shares, sourced, never run.
# shellcheck shell=bash
#
# bench_init NAME                 die()/note() that name the benchmark
# bench_require TOOL...           die unless each tool is on PATH
# bench_build_stfs DIR CMAKE_ARG...  sets STFS: $STFS_BIN, or a Release build of
#                                 the stfs target in DIR (log in DIR/bench-build.log)
# bench_workdir PREFIX NEED_MIB   sets WORK (a temp dir with NEED_MIB free) and
#                                 MOUNTS (register mount points there); on exit
#                                 unmounts them, calls bench_cleanup_hook if
#                                 defined, stops servers started here, and
#                                 removes WORK
# bench_nginx_start DOCROOT       (after bench_workdir) serves DOCROOT with a
#                                 private nginx on a free loopback port; sets
#                                 NGINX_URL (http://127.0.0.1:PORT, no slash)
# bench_free_port                 prints a free loopback TCP port
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
    # ccache (when installed) shares objects with the other builds of this tree.
    command -v ccache >/dev/null &&
      set -- -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "$@"
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
  for m in "${BENCH_SERVER_PIDS[@]}"; do
    kill "$m" 2>/dev/null && wait "$m" 2>/dev/null || true
  done
  rm -rf "$WORK"
}

bench_workdir() {
  local prefix="$1" need_mib="$2" avail_mib
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX")"
  MOUNTS=()
  BENCH_SERVER_PIDS=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  avail_mib=$(df --output=avail -BM "$WORK" | tail -1 | tr -dc 0-9)
  ((avail_mib >= need_mib)) || die "$WORK has ${avail_mib} MiB free, need ${need_mib} MiB (set TMPDIR)"
}

bench_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

NGINX=/usr/sbin/nginx
bench_nginx_start() {
  local docroot="$1" dir="$WORK/nginx" port pid
  [[ -x "$NGINX" ]] || die "$NGINX not found: run scripts/setup.sh"
  port=$(bench_free_port)
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $dir/client_body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$port; root $docroot; }
}
EOF
  "$NGINX" -e "$dir/error.log" -p "$dir/" -c "$dir/nginx.conf" &
  pid=$!
  BENCH_SERVER_PIDS+=("$pid")
  NGINX_URL="http://127.0.0.1:$port"
  for _ in $(seq 100); do
    curl -s -o /dev/null "$NGINX_URL/" && break
    sleep 0.05
  done
  kill -0 "$pid" 2>/dev/null || die "nginx did not start: $(cat "$dir/error.log")"
}
