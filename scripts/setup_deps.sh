#!/usr/bin/env bash
# Checks that this machine can configure the tutorial, looking for the tools and libraries
# themselves wherever they came from (Debian packages, pip, /usr/local, CMAKE_PREFIX_PATH):
# cmake >= 3.25, a C++ compiler, make or ninja, and the Eigen3, GTest and benchmark CMake packages.
# As root with apt-get it installs what is missing; otherwise, or offline, it says what is missing
# and how to get it. It never fails (exit status 0): configuring gives the verdict.
set -uo pipefail  # no -e: every step reports and goes on

min_cmake=3.25
declare -A debian=([cmake]=cmake [compiler]=g++ [make]=make [Eigen3]=libeigen3-dev
                   [GTest]="libgtest-dev libgmock-dev" [benchmark]=libbenchmark-dev)
declare -A host=([Eigen3]=gitlab.com [GTest]=github.com [benchmark]=github.com)  # FetchContent's
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake_version() { cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p'; }
join() { local IFS=, s; s="$*"; echo "${s//,/, }"; }  # join a b c -> "a, b, c"
packages_for() { local k out=(); for k; do out+=("${debian[$k]}"); done; echo "${out[*]}"; }  # keys -> packages
version_ok() { [[ -n $1 ]] && printf '%s\n' "$min_cmake" "$1" | sort -V -C; }  # $1 >= min_cmake

missing_tools() {  # prints the tools that are missing, as keys of `debian`
  version_ok "$(cmake_version)" || echo cmake
  command -v "${CXX:-c++}" >/dev/null || command -v g++ >/dev/null || command -v clang++ >/dev/null ||
    echo compiler
  command -v make >/dev/null || command -v ninja >/dev/null || echo make
}

missing_libraries() {  # the same find_package calls as cmake/Dependencies.cmake, in a scratch project
  cat >"$tmp/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(probe CXX)
find_package(Eigen3 3.3 QUIET NO_MODULE)
find_package(GTest QUIET)
find_package(benchmark QUIET)
foreach(pair Eigen3=Eigen3::Eigen GTest=GTest::gtest_main benchmark=benchmark::benchmark)
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 1 target)
  if(NOT TARGET ${target})
    list(GET pair 0 name)
    file(APPEND "${CMAKE_BINARY_DIR}/missing" "${name}\n")
  endif()
endforeach()
EOF
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  rm -rf "$tmp/probe"
  cmake -S "$tmp" -B "$tmp/probe" "${generator[@]}" >"$tmp/probe.log" 2>&1 ||
    { echo "probe-failed"; return; }
  cat "$tmp/probe/missing" 2>/dev/null
}

updated="" unreachable=""
apt_install() {  # apt_install KEY...: installs their Debian packages; on failure says why in one line
  local packages
  read -ra packages <<<"$(packages_for "$@")"
  echo "setup: installing ${packages[*]}"
  local apt=(apt-get -qq -o Acquire::Retries=0 -o Acquire::http::Timeout=15 -o Acquire::https::Timeout=15)
  if [[ -z $updated ]]; then  # offline, apt-get update warns "Failed to fetch" yet may exit 0
    if ! "${apt[@]}" update >"$tmp/apt.log" 2>&1 || grep -q 'Failed to fetch' "$tmp/apt.log"; then
      unreachable=" (apt-get update could not reach the package mirrors: offline?)"
    fi
    updated=1
  fi
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${packages[@]}" \
    >"$tmp/apt.log" 2>&1 && return 0
  echo "setup: apt-get install failed$unreachable: $(grep -m1 '^E:' "$tmp/apt.log" || tail -1 "$tmp/apt.log")"
  return 1
}

describe() {  # describe KEY: what is missing, in words
  case $1 in
    cmake) local v; v=$(cmake_version)
           if [[ -n $v ]]; then echo "cmake >= $min_cmake (cmake $v on PATH)"; else echo "cmake >= $min_cmake"; fi ;;
    compiler) echo "a C++ compiler (c++, g++ or clang++)" ;;
    make) echo "make or ninja" ;;
    *) echo "the $1 CMake package" ;;
  esac
}

can_install="" why_not="not root"  # why_not: why this script cannot install anything
command -v apt-get >/dev/null || why_not="no apt-get"
[[ $(id -u) == 0 ]] && command -v apt-get >/dev/null && can_install=1 why_not="apt-get failed"

# Tools first: the libraries are looked for with cmake and the compiler.
mapfile -t tools < <(missing_tools)
if ((${#tools[@]})) && [[ -n $can_install ]]; then
  apt_install "${tools[@]}"
  mapfile -t tools < <(missing_tools)
fi
libs=()
if ((${#tools[@]} == 0)); then
  mapfile -t libs < <(missing_libraries)
  if [[ ${libs[*]} == probe-failed ]]; then
    echo "setup: the probe for Eigen3, GTest and benchmark could not configure" \
         "($(grep -m1 -i error "$tmp/probe.log")); configuring will show why"
    libs=()
  elif ((${#libs[@]})) && [[ -n $can_install ]]; then
    apt_install "${libs[@]}" && why_not="apt-get installed packages that do not provide them"
    mapfile -t libs < <(missing_libraries)
  fi
fi

# The verdict: what is still missing, and how to get it.
if ((${#tools[@]} + ${#libs[@]} == 0)); then
  echo "setup: found cmake $(cmake_version), a C++ compiler, make or ninja, Eigen3, GTest and benchmark"
fi
for k in "${tools[@]}" "${libs[@]}"; do echo "setup: missing: $(describe "$k")"; done
to_install=$(packages_for "${tools[@]}" "${libs[@]}")
if [[ -n $to_install ]]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup:   to install: the Debian/Ubuntu packages $to_install, or this system's equivalents"
  elif [[ -z $can_install ]]; then
    echo "setup:   to install: as root, apt-get install $to_install"
  fi
  [[ " ${tools[*]} " == *" cmake "* ]] &&
    echo "setup:   a recent cmake, as any user: python3 -m pip install --user cmake (then put ~/.local/bin on PATH)"
fi
if ((${#tools[@]})); then
  echo "setup: configuring will fail until these tools are installed (the libraries are checked after them)"
fi
if ((${#libs[@]})); then
  echo "setup:   configuring downloads $(join "${libs[@]}") instead (cmake/Dependencies.cmake: FetchContent" \
       "at pinned versions), which needs network"
  reachable() {  # reachable HOST; curl honours https_proxy, as CMake's downloads do
    if command -v curl >/dev/null; then curl -sSI --max-time 5 -o /dev/null "https://$1" 2>/dev/null
    else timeout 5 bash -c "</dev/tcp/$1/443" 2>/dev/null; fi
  }
  unreachable_hosts=()
  for h in $(for k in "${libs[@]}"; do echo "${host[$k]}"; done | sort -u); do
    reachable "$h" || unreachable_hosts+=("$h")
  done
  if ((${#unreachable_hosts[@]})); then
    echo "setup: configuring will FAIL: $(join "${libs[@]}") not installed, not installable here ($why_not)," \
         "and $(join "${unreachable_hosts[@]}") unreachable (offline?). Install them, or point" \
         "CMAKE_PREFIX_PATH at an install."
  fi
fi
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: no CUDA compiler (nvcc) found: only the CPU parts will be built"
fi
exit 0
