#!/usr/bin/env bash
# gpu-check.sh: build stfs-gpu, run its tests and benchmark it, in one run.
#
# On a GPU machine (the lent H200): builds only the CUDA target, its tests,
# libstfs_gpu.so and the benchmark; runs the tests (device bytes compared
# with the file's bytes); then measures, in the same invocation,
#   (a) the pinned host->device cudaMemcpy ceiling,
#   (b) stfs loading a generated BF16 model from /dev/shm: whole, and a 1/W
#       row shard and a 1/W column shard of every 2-D tensor,
#   (c) safetensors.safe_open(framework="pt", device="cuda:0") get_tensor /
#       get_slice on the same file (after checking stfs equals it bit for bit),
# and prints GB/s and the ratios the issue asks for.
# With --cpu-only (machines without a GPU): the same build and tests (device
# tests skip), a small model through the host copy engine, and a ratio
# against a plain sequential read. No figure is printed that was not
# measured in this run.
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
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

DEPS="$ROOT/.gpu-deps"
log() { printf '\n== %s\n' "$*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
T_START=$(now)

if [[ $FETCH == 1 ]]; then
  mkdir -p "$DEPS/debs"
  (cd "$DEPS/debs" && apt-get download nlohmann-json3-dev googletest)
  for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$DEPS"; done
  grep -qx '/.gpu-deps/' "$ROOT/.git/info/exclude" 2>/dev/null || echo '/.gpu-deps/' >> "$ROOT/.git/info/exclude"
  du -sh "$DEPS"
  echo "gpu-check: carry .gpu-deps with the device run"
  exit 0
fi

# ---- where we are -------------------------------------------------------
HAVE_GPU=0
if [[ $CPU_ONLY == 0 ]] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  HAVE_GPU=1
fi
if [[ $CPU_ONLY == 0 && $HAVE_GPU == 0 ]]; then
  echo "gpu-check: no GPU found (nvidia-smi); running the CPU parts only (--cpu-only)"
  CPU_ONLY=1
fi
[[ -n "$JOBS" ]] || JOBS=$(( $(nproc) > 16 ? 16 : $(nproc) ))
[[ -n "$BUILD" ]] || BUILD="$ROOT/build-gpu-check"
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH=/usr/local/cuda/bin:$PATH; fi
log "machine: $(uname -m), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory"
[[ $HAVE_GPU == 1 ]] && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
nvcc --version | tail -1
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
TARGETS=(stfs_gpu stfs_gpu_shared stfs_gpu_bench)
[[ $TESTS == 1 ]] && TARGETS+=(stfs_gpu_tests)
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}" 2>&1 | grep -E "error|warning: |Built target" || true
[[ -x "$BUILD/core/cuda/stfs_gpu_bench" ]] || { echo "gpu-check: build failed" >&2; exit 1; }
BENCH="$BUILD/core/cuda/stfs_gpu_bench"
SO="$BUILD/core/cuda/libstfs_gpu.so"
echo "build: $(since "$T0") s"

# ---- tests ---------------------------------------------------------------
FAILED=0
if [[ $TESTS == 1 ]]; then
  log "stfs-gpu tests"
  "$BUILD/tests/cuda/stfs_gpu_tests" --gtest_brief=1 2>&1 | tail -25 || FAILED=1
fi
log "ctypes smoke test of libstfs_gpu.so"
python3 "$ROOT/tests/cuda/ctypes_smoke_test.py" "$SO" || FAILED=1

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
cleanup() { [[ $KEEP == 1 ]] || rm -f "$MODEL"; }
trap cleanup EXIT
log "generating a BF16 model of ~$((MODEL_BYTES >> 20)) MiB at $MODEL"
"$BENCH" generate --out "$MODEL" --bytes "$MODEL_BYTES" "${GEN_DIMS[@]}"

# ---- benchmarks ------------------------------------------------------------
RESULTS="$BUILD/gpu-check-results.txt"
: > "$RESULTS"
run() { "$@" | tee -a "$RESULTS"; }
if [[ $CPU_ONLY == 1 ]]; then
  log "host engine benchmarks (no GPU: destination is host memory)"
  run "$BENCH" readfile --file "$MODEL" || FAILED=1
  for mode in whole rows cols; do
    run "$BENCH" load --file "$MODEL" --engine host --mode "$mode" --world "$WORLD" --verify --name "stfs_${mode}" || FAILED=1
  done
else
  log "(a) pinned host->device ceiling"
  run "$BENCH" ceiling --mib 1024 --repeat 5 || FAILED=1
  log "(b) stfs into GPU memory"
  run "$BENCH" load --file "$MODEL" --mode whole --verify --name stfs_whole || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode whole --staging-count 16 --threads 12 --name stfs_whole_16x12 || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode rows --world "$WORLD" --verify --name stfs_rows || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode cols --world "$WORLD" --verify --name stfs_cols || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode cols --world "$WORLD" --gap 0 --name stfs_cols_gap0 || FAILED=1
  run "$BENCH" load --file "$MODEL" --mode cols --world "$WORLD" --gather 4096 --verify --name stfs_cols_gather || FAILED=1
  log "(c) safetensors (safe_open, device=cuda:0) on the same file"
  PYTHONUNBUFFERED=1 run python3 "$ROOT/core/cuda/tools/safetensors_bench.py" "$MODEL" "$SO" --world "$WORLD" || FAILED=1
fi

# ---- summary ---------------------------------------------------------------
log "summary"
python3 - "$RESULTS" "$CPU_ONLY" "$WORLD" <<'EOF'
import json, sys
res = {}
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        r = json.loads(line[7:]); res[r["name"]] = r
cpu_only, world = sys.argv[2] == "1", int(sys.argv[3])
def g(n): return res[n]["gbps"] if n in res else None
def ratio(label, a, b, goal=None):
    if g(a) is None or g(b) is None or g(b) == 0:
        print(f"  {label:<48} n/a"); return
    r = g(a) / g(b)
    verdict = "" if goal is None else ("  (goal >= %.1f: %s)" % (goal, "met" if r >= goal else "NOT met"))
    print(f"  {label:<48} {r:6.2f}x{verdict}")
for n, r in res.items():
    print(f"  {n:<30} {r['gbps']:8.2f} GB/s  ({r['bytes'] / 2**30:.3f} GiB, {r['seconds']:.4f} s)")
if cpu_only:
    ratio("stfs whole (host engine) / sequential pread", "stfs_whole", "sequential_pread_1_thread")
else:
    best = max(("stfs_whole", "stfs_whole_16x12"), key=lambda n: g(n) or 0)
    ratio(f"{best} / pinned ceiling", best, "pinned_h2d_ceiling", 0.8)
    ratio(f"{best} / safetensors get_tensor", best, "safetensors_whole", 3.0)
    ratio("stfs rows / safetensors get_slice rows", "stfs_rows", "safetensors_rows")
    ratio("stfs cols / safetensors get_slice cols", "stfs_cols", "safetensors_cols")
for mode in ("rows", "cols"):
    if f"stfs_{mode}" in res and "stfs_whole" in res:
        share = res[f"stfs_{mode}"]["bytes"] / res["stfs_whole"]["bytes"]
        print(f"  1/{world} {mode} shard moves {share:.4f} of the whole model's bytes (1/{world} = {1/world:.4f})")
EOF
printf '\ngpu-check: %s in %s s (%s)\n' "$([[ $FAILED == 0 ]] && echo passed || echo FAILED)" \
  "$(since "$T_START")" "$([[ $CPU_ONLY == 1 ]] && echo 'CPU only: the device run is still owed' || echo 'GPU')"
exit $FAILED
