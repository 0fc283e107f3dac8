#!/usr/bin/env bash
# gpu-check.sh: build stfs-gpu, run its tests and benchmark it, in one run.
#
# On a GPU machine (the lent H200), in one command of a few minutes:
#   1. builds only the GPU target, its tests, libstfs_gpu.so and the benchmark;
#   2. runs the CPU suite, the device suite (device discipline, streams,
#      refused destinations, many destinations, every dtype, every rank's
#      shards), the ctypes smoke test and the Python package's tests, with
#      STFS_GPU_REQUIRE_DEVICE=1: a device skip, a missing GoogleTest, a
#      missing torch/safetensors or a zero test count is a FAILURE, never a pass;
#   3. measures, end to end and the same for both sides (from nothing open to
#      every tensor on cuda:0 and synchronised, allocation included): the
#      pinned host->device ceiling (every CUDA return code checked);
#      stfs.load_file vs safetensors.torch.load_file(path, device="cuda:0"),
#      and a 1/W row and column shard vs safe_open(...).get_slice, on a
#      generated BF16 model in /dev/shm and in the page cache; stfs's bytes
#      are checked against safetensors' bit for bit; the column shard's bytes
#      read and copied against its size; host staging;
#   4. prints the ratios against the targets (whole >= 0.9x the ceiling and
#      >= 5x safetensors; column shard moved <= 1.1x; staging <= 512 MiB).
# When $OUT is set, the full log goes to $OUT/gpu-check.log and the results
# to $OUT/gpu-check-results.txt (RESULT lines) and $OUT/gpu-check-summary.txt.
# With --cpu-only (machines without a GPU): the same build and the CPU tests
# (device tests skip), and the host engine on a small model. No figure is
# printed that was not measured in this run. Exit status 0 only when every
# test passed (and, on a GPU, every comparison with safetensors).
#
# Usage: scripts/gpu-check.sh [--cpu-only] [--size-gib N] [--world W]
#                             [--build-dir DIR] [--jobs N] [--keep-model]
#        scripts/gpu-check.sh --fetch-deps
#   --fetch-deps  downloads nlohmann-json3-dev and googletest (Debian
#                 packages) into .gpu-deps/ for a machine that lacks them (the
#                 H200 image has CUDA, CMake and PyTorch but neither); carry
#                 .gpu-deps with the run (and list it in .git/info/exclude).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CPU_ONLY=0
SIZE_GIB=8
WORLD=8
BUILD=""
JOBS=""
KEEP=0
FETCH=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu-only) CPU_ONLY=1 ;;
    --size-gib) SIZE_GIB=$2; shift ;;
    --world) WORLD=$2; shift ;;
    --build-dir) BUILD=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --keep-model) KEEP=1 ;;
    --fetch-deps) FETCH=1 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

DEPS="$ROOT/.gpu-deps"
log() { printf '\n== %s\n' "$*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
fail_now() { echo "gpu-check: FAILED: $*" >&2; exit 1; }
T_START=$(now)

if [[ $FETCH == 1 ]]; then
  mkdir -p "$DEPS/debs"
  (cd "$DEPS/debs" && apt-get download nlohmann-json3-dev googletest)
  for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$DEPS"; done
  # Keep .gpu-deps out of git (worktrees too: their .git is a file).
  EXCLUDE=$(git -C "$ROOT" rev-parse --git-path info/exclude 2>/dev/null || true)
  if [[ -n "$EXCLUDE" ]]; then
    [[ "$EXCLUDE" == /* ]] || EXCLUDE="$ROOT/$EXCLUDE"
    mkdir -p "$(dirname "$EXCLUDE")"
    grep -qx '/.gpu-deps/' "$EXCLUDE" 2>/dev/null || echo '/.gpu-deps/' >> "$EXCLUDE"
  fi
  du -sh "$DEPS"
  echo "gpu-check: carry .gpu-deps with the device run"
  exit 0
fi

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/gpu-check.log") 2>&1
fi

# ---- where we are -------------------------------------------------------
HAVE_GPU=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then HAVE_GPU=1; fi
if [[ $CPU_ONLY == 0 && $HAVE_GPU == 0 ]]; then
  fail_now "no GPU found (nvidia-smi -L); a device check cannot pass without one (--cpu-only runs the CPU parts)"
fi
# The Python used for the package tests and the benchmark: python3, or on a
# CPU-only machine Debian's /usr/bin/python3 when only it has numpy.
PY=python3
if [[ $CPU_ONLY == 0 ]]; then
  export STFS_GPU_REQUIRE_DEVICE=1
  $PY -c 'import torch, safetensors, numpy' 2>/dev/null ||
    fail_now "python3 lacks torch, safetensors or numpy: the device check compares stfs with safetensors.torch"
else
  unset STFS_GPU_REQUIRE_DEVICE
  if ! $PY -c 'import numpy' 2>/dev/null && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then PY=/usr/bin/python3; fi
fi
[[ -n "$JOBS" ]] || JOBS=$(( $(nproc) > 16 ? 16 : $(nproc) ))
[[ -n "$BUILD" ]] || BUILD="$ROOT/build-gpu-check"
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
log "machine: $(uname -m), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory"
if [[ $HAVE_GPU == 1 ]]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
fi
if command -v nvcc >/dev/null; then nvcc --version | tail -1; fi
cmake --version | head -1

# ---- dependencies: nlohmann-json and GoogleTest --------------------------
CMAKE_ARGS=(-DSTFS_BUILD_FS=OFF -DSTFS_BUILD_REMOTE=OFF -DSTFS_BUILD_CUDA=ON -DCMAKE_BUILD_TYPE=Release)
PREFIXES=()
[[ -d "$DEPS/usr" ]] && PREFIXES+=("$DEPS/usr")

# GPU_CHECK_IGNORE_SYSTEM_DEPS=1 rehearses, on a machine that has them, the
# path taken where the system lacks nlohmann-json and GoogleTest.
SYSTEM_DEPS=1
[[ "${GPU_CHECK_IGNORE_SYSTEM_DEPS:-0}" == 1 ]] && SYSTEM_DEPS=0
if [[ $SYSTEM_DEPS == 1 && -f /usr/include/nlohmann/json.hpp ]]; then
  :
elif [[ -f "$DEPS/usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" ]]; then
  CMAKE_ARGS+=(-Dnlohmann_json_DIR="$DEPS/usr/share/cmake/nlohmann_json")
else
  # Last resort: a json.hpp shipped inside PyTorch, wrapped in a small
  # CMake package so core's find_package(nlohmann_json) succeeds.
  JSON_INC=$(python3 - <<'EOF' 2>/dev/null || true
import os, torch
d = os.path.join(os.path.dirname(torch.__file__), "include")
print(d if os.path.isfile(os.path.join(d, "nlohmann", "json.hpp")) else "")
EOF
)
  if [[ -z "$JSON_INC" ]]; then
    echo "gpu-check: nlohmann/json.hpp not found; run 'scripts/gpu-check.sh --fetch-deps' on a machine with apt and carry .gpu-deps" >&2
    exit 1
  fi
  SHIM="$BUILD/_shim/nlohmann_json"
  mkdir -p "$SHIM"
  cat > "$SHIM/nlohmann_jsonConfig.cmake" <<EOF
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$JSON_INC")
endif()
EOF
  echo 'set(PACKAGE_VERSION 3.11.0)
set(PACKAGE_VERSION_COMPATIBLE TRUE)' > "$SHIM/nlohmann_jsonConfigVersion.cmake"
  CMAKE_ARGS+=(-Dnlohmann_json_DIR="$SHIM")
  echo "gpu-check: using nlohmann/json.hpp from $JSON_INC"
fi

have_system_gtest() {
  compgen -G "/usr/lib/*/cmake/GTest/GTestConfig.cmake" >/dev/null || compgen -G "/usr/lib/cmake/GTest/GTestConfig.cmake" >/dev/null ||
    compgen -G "/usr/local/lib*/cmake/GTest/GTestConfig.cmake" >/dev/null
}
TESTS=1
if [[ $SYSTEM_DEPS == 0 ]] || ! have_system_gtest; then
  if [[ -f "$DEPS/usr/src/googletest/CMakeLists.txt" ]]; then
    log "building GoogleTest from .gpu-deps"
    cmake -S "$DEPS/usr/src/googletest" -B "$BUILD/_gtest" -DBUILD_GMOCK=OFF -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$BUILD/_gtest/install" >/dev/null
    cmake --build "$BUILD/_gtest" -j "$JOBS" >/dev/null
    cmake --install "$BUILD/_gtest" >/dev/null
    CMAKE_ARGS+=(-DGTest_DIR="$(dirname "$(find "$BUILD/_gtest/install" -name GTestConfig.cmake | head -1)")")
  elif [[ $CPU_ONLY == 0 ]]; then
    fail_now "GoogleTest not found and no .gpu-deps: run 'scripts/gpu-check.sh --fetch-deps' where apt works and carry .gpu-deps"
  else
    echo "gpu-check: GoogleTest not found and no .gpu-deps: building without the gtest suite" >&2
    TESTS=0
    CMAKE_ARGS+=(-DSTFS_BUILD_TESTS=OFF)
  fi
fi
if [[ ${#PREFIXES[@]} -gt 0 ]]; then
  CMAKE_ARGS+=("-DCMAKE_PREFIX_PATH=$(IFS=';'; echo "${PREFIXES[*]}")")
fi
if [[ $HAVE_GPU == 1 ]]; then
  CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
  [[ -n "$CAP" ]] && CMAKE_ARGS+=(-DCMAKE_CUDA_ARCHITECTURES="$CAP")
fi

# ---- build ---------------------------------------------------------------
log "configure and build (stfs_gpu, tests, libstfs_gpu.so, benchmark) in $BUILD"
T0=$(now)
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" "${CMAKE_ARGS[@]}" > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
grep -E "stfs-gpu" "$BUILD/configure.log" || true
HAVE_CUDA_ENGINE=0
grep -q "STFS_GPU_HAVE_CUDA:INTERNAL=ON" "$BUILD/CMakeCache.txt" && HAVE_CUDA_ENGINE=1
[[ $CPU_ONLY == 1 || $HAVE_CUDA_ENGINE == 1 ]] || fail_now "CMake found no CUDA compiler: the device check needs the CUDA engine"
TARGETS=(stfs_gpu stfs_gpu_shared)
[[ $HAVE_CUDA_ENGINE == 1 ]] && TARGETS+=(stfs_gpu_bench)
if [[ $TESTS == 1 ]]; then
  TARGETS+=(stfs_gpu_tests)
  [[ $HAVE_CUDA_ENGINE == 1 ]] && TARGETS+=(stfs_gpu_device_tests)
fi
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" 2>&1 | grep -E "error|warning: |Built target" || true
SO="$BUILD/core/cuda/libstfs_gpu.so"
BENCH="$BUILD/core/cuda/stfs_gpu_bench"
[[ -f "$SO" ]] || fail_now "build failed (no libstfs_gpu.so)"
[[ $HAVE_CUDA_ENGINE == 0 || -x "$BENCH" ]] || fail_now "build failed (no stfs_gpu_bench)"
echo "build: $(since "$T0") s"

# ---- tests ---------------------------------------------------------------
FAILED=0
SUMMARY_LINES=()
# Runs a gtest binary: fails on a failed test, on zero tests run, and on a
# GPU machine on any skipped test.
run_gtest() {
  local bin=$1 out rc=0 ran skipped
  if [[ ! -x "$bin" ]]; then
    echo "gpu-check: $bin was not built" >&2; FAILED=1; SUMMARY_LINES+=("$(basename "$bin"): not built"); return
  fi
  out=$("$bin" 2>&1) || rc=$?
  printf '%s\n' "$out" | grep -E '^\[ *(FAILED|SKIPPED) *\]|^\[==========\]|^\[  PASSED  \]|Failure|no CUDA device' | head -80 || true
  ran=$(printf '%s\n' "$out" | sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran.*/\1/p' | tail -1)
  skipped=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' | tail -1)
  ran=${ran:-0}; skipped=${skipped:-0}
  SUMMARY_LINES+=("$(basename "$bin"): $ran tests ran, $skipped skipped, exit status $rc")
  [[ $rc == 0 ]] || FAILED=1
  if [[ $ran == 0 ]]; then echo "gpu-check: $(basename "$bin") ran zero tests" >&2; FAILED=1; fi
  if [[ $CPU_ONLY == 0 && $skipped != 0 ]]; then
    echo "gpu-check: $(basename "$bin") skipped $skipped tests on a GPU machine" >&2; FAILED=1
  fi
}
if [[ $TESTS == 1 ]]; then
  log "stfs-gpu CPU suite"
  run_gtest "$BUILD/tests/cuda/stfs_gpu_tests"
  if [[ $HAVE_CUDA_ENGINE == 1 ]]; then
    log "stfs-gpu device suite (STFS_GPU_REQUIRE_DEVICE=${STFS_GPU_REQUIRE_DEVICE:-unset})"
    run_gtest "$BUILD/tests/cuda/stfs_gpu_device_tests"
  fi
fi
log "ctypes smoke test of libstfs_gpu.so"
$PY "$ROOT/tests/cuda/ctypes_smoke_test.py" "$SO" || FAILED=1
log "Python package (python/stfs)"
PY_LOG="$BUILD/python-tests.log"
(cd "$ROOT/tests/cuda" && STFS_GPU_LIBRARY="$SO" PYTHONPATH="$ROOT/python" $PY -m unittest -v test_stfs_python) \
  >"$PY_LOG" 2>&1 || FAILED=1
cat "$PY_LOG"
if [[ $CPU_ONLY == 0 ]] && grep -q "skipped" "$PY_LOG"; then
  echo "gpu-check: Python tests skipped on a GPU machine" >&2; FAILED=1
fi
SUMMARY_LINES+=("python package: $(tail -1 "$PY_LOG")")

# ---- model ---------------------------------------------------------------
if [[ $CPU_ONLY == 1 ]]; then
  MODEL_BYTES=$((64 << 20)); GEN_DIMS=(--hidden 512 --ffn 1408 --vocab 4000)
else
  MODEL_BYTES=$((SIZE_GIB << 30)); GEN_DIMS=()
fi
MODEL_DIR=/dev/shm
AVAIL=$(df -B1 --output=avail "$MODEL_DIR" 2>/dev/null | tail -1 || echo 0)
if [[ "$AVAIL" -lt $((MODEL_BYTES + (MODEL_BYTES >> 3) + (256 << 20))) ]]; then
  MODEL_DIR=${TMPDIR:-/tmp}
  echo "gpu-check: /dev/shm has too little room; the model goes to $MODEL_DIR (figures then include disk/page cache)"
fi
MODEL="$MODEL_DIR/stfs-gpu-check-$$.safetensors"
DISK_MODEL="${TMPDIR:-/tmp}/stfs-gpu-check-$$-disk.safetensors"
cleanup() { [[ $KEEP == 1 ]] || rm -f "$MODEL" "$DISK_MODEL"; }
trap cleanup EXIT

# ---- benchmarks ------------------------------------------------------------
RESULTS="$BUILD/gpu-check-results.txt"
: > "$RESULTS"
run() { "$@" | tee -a "$RESULTS"; return "${PIPESTATUS[0]}"; }
if [[ $HAVE_CUDA_ENGINE == 1 ]]; then
  log "generating a BF16 model of ~$((MODEL_BYTES >> 20)) MiB at $MODEL"
  "$BENCH" generate --out "$MODEL" --bytes "$MODEL_BYTES" "${GEN_DIMS[@]}"
fi
if [[ $CPU_ONLY == 1 ]]; then
  if [[ $HAVE_CUDA_ENGINE == 1 ]]; then
    log "host engine, end to end (no GPU: the destination is host memory)"
    run "$BENCH" readfile --file "$MODEL" || FAILED=1
    for mode in whole rows cols; do
      run "$BENCH" load --file "$MODEL" --engine host --mode "$mode" --world "$WORLD" --name "stfs_host_${mode}" || FAILED=1
    done
  fi
else
  cp "$MODEL" "$DISK_MODEL"
  log "(a) pinned host->device ceiling"
  run "$BENCH" ceiling --mib 1024 --repeat 5 || FAILED=1
  log "(b) stfs end to end from C++ (variants)"
  run "$BENCH" load --file "$MODEL" --mode whole --repeat 2 --name stfs_cc_whole || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode whole --repeat 2 --staging-count 16 --threads 12 --name stfs_cc_whole_16x12 || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode cols --world "$WORLD" --repeat 2 --name stfs_cc_cols || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode cols --world "$WORLD" --repeat 2 --gap 0 --name stfs_cc_cols_gap0 || FAILED=1
  log "(c) stfs.load_file vs safetensors.torch, end to end, checked against safetensors"
  PYTHONUNBUFFERED=1 STFS_GPU_LIBRARY="$SO" run $PY "$ROOT/core/cuda/tools/end_to_end_bench.py" \
    "$MODEL" "$DISK_MODEL" --world "$WORLD" --repeat 2 || FAILED=1
fi

# ---- summary ---------------------------------------------------------------
log "summary"
SUMMARY="$BUILD/gpu-check-summary.txt"
{
  printf '%s\n' "${SUMMARY_LINES[@]}"
  $PY "$ROOT/core/cuda/tools/gpu_check_summary.py" "$RESULTS" "$CPU_ONLY" "$WORLD"
} | tee "$SUMMARY"
if [[ -n "${OUT:-}" ]]; then
  cp "$RESULTS" "$OUT/gpu-check-results.txt"
  cp "$SUMMARY" "$OUT/gpu-check-summary.txt"
fi
printf '\ngpu-check: %s in %s s (%s)\n' "$([[ $FAILED == 0 ]] && echo passed || echo FAILED)" \
  "$(since "$T_START")" "$([[ $CPU_ONLY == 1 ]] && echo 'CPU only: the device run is still owed' || echo 'GPU')"
exit $FAILED
