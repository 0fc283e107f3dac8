#!/usr/bin/env bash
# Configures and builds stfs into build/ (or $STFS_BUILD_DIR). Extra
# arguments go to cmake's configure step (e.g. -DSTFS_BUILD_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${STFS_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${STFS_BUILD_TYPE:-RelWithDebInfo}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
