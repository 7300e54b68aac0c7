# Eigen3 (the CPU reference), GoogleTest and Google Benchmark.
# find_package first: Debian/Ubuntu ship all three (libeigen3-dev, libgtest-dev,
# libbenchmark-dev, which scripts/setup_deps.sh installs). Where one is missing we fall back
# to FetchContent at a pinned release, so a machine with internet access still builds.
include(FetchContent)

find_package(Eigen3 3.3 QUIET NO_MODULE)
if(NOT TARGET Eigen3::Eigen)
  message(STATUS "Eigen3 not found: fetching 3.4.0")
  set(EIGEN_BUILD_DOC OFF CACHE BOOL "" FORCE)
  set(EIGEN_BUILD_TESTING OFF CACHE BOOL "" FORCE)
  FetchContent_Declare(eigen
    URL https://gitlab.com/libeigen/eigen/-/archive/3.4.0/eigen-3.4.0.tar.gz)
  FetchContent_MakeAvailable(eigen)   # Eigen 3.4 defines the Eigen3::Eigen alias itself
endif()

find_package(GTest QUIET)
if(NOT TARGET GTest::gtest_main)
  message(STATUS "GoogleTest not found: fetching 1.14.0")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  FetchContent_Declare(googletest
    URL https://github.com/google/googletest/archive/refs/tags/v1.14.0.tar.gz)
  FetchContent_MakeAvailable(googletest)
endif()
include(GoogleTest)

find_package(OpenMP QUIET)   # optional: the CPU reference runs (b, h) slices in parallel

find_package(benchmark QUIET)
if(NOT TARGET benchmark::benchmark)
  message(STATUS "Google Benchmark not found: fetching 1.8.3")
  set(BENCHMARK_ENABLE_TESTING OFF CACHE BOOL "" FORCE)
  set(BENCHMARK_ENABLE_GTEST_TESTS OFF CACHE BOOL "" FORCE)
  FetchContent_Declare(googlebenchmark
    URL https://github.com/google/benchmark/archive/refs/tags/v1.8.3.tar.gz)
  FetchContent_MakeAvailable(googlebenchmark)
endif()
