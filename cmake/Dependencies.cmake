# Eigen3 (the CPU reference), GoogleTest and Google Benchmark.
# find_package first: Debian/Ubuntu ship all three (libeigen3-dev, libgtest-dev,
# libbenchmark-dev, which scripts/setup_deps.sh installs). Where one is missing we fall back
# to FetchContent at a pinned release, so a machine with internet access still builds.
include(FetchContent)

# fa_fetch(<content> <package> <version> <url> <debian package>): downloads the pinned release
# and adds it to the build. Offline, it stops with one readable error instead of FetchContent's
# download log.
function(fa_fetch content package version url debian)
  message(STATUS "${package} not found: downloading ${version} from ${url}")
  set(archive "${CMAKE_BINARY_DIR}/_downloads/${content}-${version}.tar.gz")
  if(NOT EXISTS "${archive}")
    file(DOWNLOAD "${url}" "${archive}.part" STATUS status INACTIVITY_TIMEOUT 60)
    list(GET status 0 code)
    list(GET status 1 why)
    if(code)
      file(REMOVE "${archive}.part")
      message(FATAL_ERROR "${package} is not installed and downloading it failed (${why}). Install "
        "it (Debian/Ubuntu: ${debian}), point CMAKE_PREFIX_PATH at an install of it, or configure "
        "with network access. scripts/setup_deps.sh checks all the dependencies.")
    endif()
    file(RENAME "${archive}.part" "${archive}")
  endif()
  FetchContent_Declare(${content} URL "${archive}")
  FetchContent_MakeAvailable(${content})
endfunction()

find_package(Eigen3 3.3 QUIET NO_MODULE)
if(NOT TARGET Eigen3::Eigen)
  set(EIGEN_BUILD_DOC OFF CACHE BOOL "" FORCE)
  set(EIGEN_BUILD_TESTING OFF CACHE BOOL "" FORCE)
  # Eigen 3.4 defines the Eigen3::Eigen alias itself.
  fa_fetch(eigen Eigen3 3.4.0 https://gitlab.com/libeigen/eigen/-/archive/3.4.0/eigen-3.4.0.tar.gz
           libeigen3-dev)
endif()

find_package(GTest QUIET)
if(NOT TARGET GTest::gtest_main)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  fa_fetch(googletest GoogleTest 1.14.0
           https://github.com/google/googletest/archive/refs/tags/v1.14.0.tar.gz
           "libgtest-dev libgmock-dev")
endif()
include(GoogleTest)

find_package(OpenMP QUIET)   # optional: the CPU reference runs (b, h) slices in parallel

find_package(benchmark QUIET)
if(NOT TARGET benchmark::benchmark)
  set(BENCHMARK_ENABLE_TESTING OFF CACHE BOOL "" FORCE)
  set(BENCHMARK_ENABLE_GTEST_TESTS OFF CACHE BOOL "" FORCE)
  fa_fetch(googlebenchmark "Google Benchmark" 1.8.3
           https://github.com/google/benchmark/archive/refs/tags/v1.8.3.tar.gz libbenchmark-dev)
endif()
