#!/usr/bin/env bash
# Configures and builds the tutorial (Release) into ./build; used by tour.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f build/CMakeCache.txt ]] && generator=()  # keep whatever generator the build dir has
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${generator[@]}"
cmake --build build -j "$(nproc)"
