#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ for SECONDS each (default 60), built
# with clang, ASan and UBSan into build-fuzz/ (or $STFS_FUZZ_BUILD_DIR).
# Each target starts from its committed seeds (fuzz/corpus/<target>/, never
# written) plus what earlier runs found (build-fuzz/corpus/<target>/). A
# crash, leak, sanitizer report or broken property leaves the input in
# build-fuzz/artifacts/ and makes the exit status non-zero: copy it into
# fuzz/corpus/<target>/ so every build replays it as a regression test.
#
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: header slice_plan
#        name_encoding http_response; default all that build here)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
build_dir="${STFS_FUZZ_BUILD_DIR:-build-fuzz}"
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (run scripts/setup.sh)" >&2; exit 1; }

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTFS_FUZZ=ON \
  -DSTFS_SANITIZE=address,undefined -DSTFS_BUILD_TESTS=OFF -DSTFS_BUILD_CUDA=OFF "${launcher[@]}" >/dev/null

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for source in fuzz/*_fuzzer.cc; do
    name="$(basename "$source" _fuzzer.cc)"
    # Only the targets whose dependencies this machine has (curl for http_response).
    if grep -q "^${name}_fuzzer:" <(cmake --build "$build_dir" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1:/p'); then
      targets+=("$name")
    fi
  done
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]/%/_fuzzer}"

mkdir -p "$build_dir/artifacts"
failed=()
for name in "${targets[@]}"; do
  mkdir -p "$build_dir/corpus/$name"
  echo "fuzz: $name for ${seconds}s"
  # Inputs stay small: the header target's bugs show at kilobytes, and the
  # 10 MB nesting case is a unit test.
  if ! "$build_dir/fuzz/${name}_fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build_dir/artifacts/$name-" \
      "$build_dir/corpus/$name" "fuzz/corpus/$name" >"$build_dir/$name.log" 2>&1; then
    failed+=("$name")
    tail -n 40 "$build_dir/$name.log" >&2
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build_dir/$name.log" | tr '\n' ' '
    echo
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $build_dir/artifacts/, logs in $build_dir/<target>.log)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no findings"
