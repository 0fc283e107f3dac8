#!/usr/bin/env bash
# Installs the Debian packages stfs needs to build and test, if missing.
# Safe to run again: installs nothing when everything is present. Needs root
# (or sudo) only when something is missing. The CUDA toolkit is not a Debian
# package here: the GPU library is built when /usr/local/cuda/bin/nvcc exists.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libfuse3-dev fuse3
  nlohmann-json3-dev
  libcurl4-openssl-dev curl
  libgtest-dev
  nginx-light
  python3 python3-numpy
  # fuzzing (libFuzzer) and sanitizer runtimes; gcc's ASan/UBSan/TSan come with build-essential
  clang libclang-rt-14-dev
)

# node + npm run s3rver, the S3-compatible server of the s3:// tests
# (scripts/s3-test-server.sh). Many machines already have a newer node than
# Debian's; only install Debian's when there is none.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
    echo "setup: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
