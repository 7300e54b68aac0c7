#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build the tutorial (the CUDA toolkit
# itself is expected to be there already). As root it installs the missing packages; as
# another user it names them and the build falls back to CMake FetchContent for the libraries.
set -euo pipefail

packages=(cmake g++ make libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all packages present"
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "setup: missing ${missing[*]}; run as root to install them (libraries fall back to FetchContent)"
fi
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: no CUDA compiler (nvcc) found: only the CPU parts will be built"
fi
