#!/usr/bin/env bash
# Installs s3rver (an S3-compatible server written for tests, from npm) into a
# cache folder when it is missing, and optionally starts it.
#
#   scripts/s3-test-server.sh install          # prints the s3rver binary path
#   scripts/s3-test-server.sh start DIR PORT   # runs s3rver in the foreground
#
# The folder is $STFS_S3RVER_DIR, else ${XDG_CACHE_HOME:-~/.cache}/stfs/s3rver.
# Test use only: s3rver accepts any secret for a known key (docs/REMOTE.md).
# Exit status 2 means node/npm are missing or the install failed, so a test
# can skip with that message.
set -euo pipefail

version=3.7.1
dir=${STFS_S3RVER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stfs/s3rver}
bin=$dir/node_modules/.bin/s3rver

install() {
  if [ -x "$bin" ]; then echo "$bin"; return 0; fi
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "s3-test-server: node and npm are needed (Debian: apt-get install nodejs npm)" >&2
    exit 2
  fi
  mkdir -p "$dir"
  # One installer at a time (parallel test binaries share the folder).
  exec 9>"$dir/.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
        "s3rver@$version" >"$dir/npm.log" 2>&1; then
      echo "s3-test-server: npm install s3rver@$version failed (see $dir/npm.log)" >&2
      exit 2
    fi
  fi
  echo "$bin"
}

case "${1:-install}" in
  install) install ;;
  start)
    [ $# -eq 3 ] || { echo "usage: $0 start DATA_DIR PORT" >&2; exit 1; }
    s3rver=$(install)
    # Continuation tokens use DES: OpenSSL 3 has it in the legacy provider.
    export NODE_OPTIONS=--openssl-legacy-provider
    exec "$s3rver" -d "$2" -p "$3" -a 127.0.0.1 --silent ;;
  *) echo "usage: $0 install | start DATA_DIR PORT" >&2; exit 1 ;;
esac
