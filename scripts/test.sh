#!/usr/bin/env bash
# The one command for a fresh machine: installs what is missing, builds and
# runs every test, in three stages, each built once:
#   1. plain: build/ (CUDA parts when nvcc exists), every CTest test;
#   2. sanitizers (STFS_TEST_SANITIZERS, default 1): build-asan/ with
#      ASan+UBSan (CUDA off) runs every test again, mounts and remote
#      included; build-tsan/ with TSan builds only the targets of tests
#      labelled `tsan` (stress, block cache) and runs `ctest -L tsan`;
#   3. fuzzing (STFS_TEST_FUZZ, default 1): scripts/fuzz.sh runs each fuzz
#      target for STFS_TEST_FUZZ_SECONDS (default 25) with clang+ASan+UBSan.
# STFS_TEST_SANITIZERS=0 STFS_TEST_FUZZ=0 is the quick developer loop. Every
# stage runs even after one fails; the exit status is non-zero if any did.
# Extra arguments go to the plain build's cmake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

jobs="$(nproc)"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# The sanitizer builds compile at -O1 (the usual choice for sanitizers, and
# quicker to build than -O2 on CI's two cores).
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g"
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" -DSTFS_BUILD_CUDA=OFF "${launcher[@]}")
failed=()
stage() {  # name command...
  local name="$1" start=$SECONDS
  shift
  echo "=== test.sh: $name"
  if "$@"; then echo "=== test.sh: $name passed ($((SECONDS - start)) s)"
  else echo "=== test.sh: $name FAILED ($((SECONDS - start)) s)"; failed+=("$name"); fi
}

plain() {
  ./scripts/build.sh "$@" &&
    ctest --test-dir "${STFS_BUILD_DIR:-build}" --output-on-failure --timeout 900 -j "$jobs"
}

# ASan+UBSan: every test (the stfs daemon of the mount tests is instrumented
# too) except those that bound RSS: ASan's shadow memory and quarantine make
# RSS figures meaningless (STFS_ASAN_EXCLUDE, a ctest -E regex, names them).
asan_exclude="${STFS_ASAN_EXCLUDE:-KeepMemoryBounded|StayUnderTheCap|RemoteMountMemory[.]}"
asan() {
  cmake -S . -B build-asan -DSTFS_SANITIZE=address,undefined "${sanitizer_flags[@]}" >/dev/null &&
    cmake --build build-asan -j "$jobs" &&
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir build-asan -E "$asan_exclude" --output-on-failure --timeout 900 -j "$jobs"
}

# TSan: only what the tsan-labelled tests need (target stfs_tsan_tests).
tsan() {
  cmake -S . -B build-tsan -DSTFS_SANITIZE=thread "${sanitizer_flags[@]}" >/dev/null &&
    cmake --build build-tsan -j "$jobs" --target stfs_tsan_tests &&
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      ctest --test-dir build-tsan -L tsan --no-tests=ignore --output-on-failure --timeout 900 -j "$jobs"
}

stage "plain build and tests" plain "$@"
if [[ "${STFS_TEST_SANITIZERS:-1}" != 0 ]]; then
  stage "ASan+UBSan build and tests" asan
  stage "TSan build and tsan-labelled tests" tsan
fi
if [[ "${STFS_TEST_FUZZ:-1}" != 0 ]]; then
  stage "fuzzing (${STFS_TEST_FUZZ_SECONDS:-25} s per target)" ./scripts/fuzz.sh "${STFS_TEST_FUZZ_SECONDS:-25}"
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all stages passed"
