#!/usr/bin/env bash
# The one command for a fresh machine: installs what is missing, builds
# everything this machine can build (CUDA parts when nvcc exists), and runs
# every test through CTest. Exit status is CTest's.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh "$@"
build_dir="${STFS_BUILD_DIR:-build}"
cd "$build_dir"
ctest --output-on-failure --timeout 900 -j "$(nproc)"
