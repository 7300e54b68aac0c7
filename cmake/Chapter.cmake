# One call per chapter:
#
#   fa_add_chapter(01_naive
#     KERNELS   naive.cu          # the chapter library (its forward), needs CUDA
#     MODEL     model.cpp         # optional CPU model of the algorithm (plain C++)
#     CPU_TESTS test_model.cpp    # optional CPU tests (run in CI)
#     GPU_TESTS test_naive.cpp    # the shared harness over this chapter's forward
#     BENCH     bench_naive.cpp   # the shared benchmark
#     MAIN      main.cpp          # the executable, named after the chapter
#     MIN_ARCH  80)               # optional: oldest GPU generation the kernels compile for
#
# Targets: fa_<name> (library), <name> (executable), <name>_tests, <name>_cpu_tests,
# <name>_bench. ctest labels: the chapter's folder name plus `gpu` or `cpu`, so
# `ctest -L 04_flash_v1` runs one chapter and `ctest -L cpu` everything that needs no GPU.

# Registers a gtest executable with ctest, one ctest entry per test case. Skipped gtest
# cases (GTEST_SKIP, used when there is no GPU) show up as "Skipped" in ctest's summary.
# (The regex has no closing bracket: CMake 4.4 mis-quotes a property value ending in "]".)
function(fa_register_gtests target chapter)
  # Refusal tests need no GPU, so they carry the cpu label even in a GPU test binary.
  gtest_discover_tests(${target}
    TEST_PREFIX "${chapter}."
    TEST_FILTER "Inputs/*"
    PROPERTIES LABELS "${chapter};cpu"
    DISCOVERY_MODE PRE_TEST)
  gtest_discover_tests(${target}
    TEST_PREFIX "${chapter}."
    TEST_FILTER "-Inputs/*"
    PROPERTIES LABELS "${chapter};gpu" SKIP_REGULAR_EXPRESSION "\\[  SKIPPED"
    DISCOVERY_MODE PRE_TEST)
endfunction()

function(fa_add_cpu_test name)
  add_executable(${name}_cpu_tests ${ARGN})
  target_link_libraries(${name}_cpu_tests PRIVATE fa_common_cpu GTest::gtest_main)
  gtest_discover_tests(${name}_cpu_tests
    TEST_PREFIX "${name}." PROPERTIES LABELS "${name};cpu" DISCOVERY_MODE PRE_TEST)
endfunction()

function(fa_add_chapter name)
  cmake_parse_arguments(CH "" "MIN_ARCH" "KERNELS;MODEL;CPU_TESTS;GPU_TESTS;BENCH;MAIN" ${ARGN})
  set(lib fa_${name})

  if(CH_MODEL)
    add_library(${lib}_model STATIC ${CH_MODEL})
    target_link_libraries(${lib}_model PUBLIC fa_common_cpu)
  endif()
  if(CH_CPU_TESTS)
    fa_add_cpu_test(${name} ${CH_CPU_TESTS})
    if(CH_MODEL)
      target_link_libraries(${name}_cpu_tests PRIVATE ${lib}_model)
    endif()
  endif()

  if(NOT FA_HAVE_CUDA)
    message(STATUS "${name}: GPU parts skipped (no CUDA compiler)")
    return()
  endif()

  # Chapters that use sm_80 instructions (cp.async, bf16 mma) compile only for the architectures
  # that have them; where none is left (a Turing-only build), the chapter is skipped, saying so.
  set(archs ${CMAKE_CUDA_ARCHITECTURES})
  if(CH_MIN_ARCH)
    set(kept "")
    foreach(arch IN LISTS archs)
      string(REGEX MATCH "^[0-9]+" number "${arch}")
      if(number GREATER_EQUAL CH_MIN_ARCH)
        list(APPEND kept ${arch})
      endif()
    endforeach()
    if(NOT kept)
      message(WARNING "${name} needs sm_${CH_MIN_ARCH} or newer; CMAKE_CUDA_ARCHITECTURES is "
                      "'${archs}': the chapter is skipped")
      return()
    endif()
    set(archs ${kept})
  endif()

  add_library(${lib} STATIC ${CH_KERNELS})
  set_target_properties(${lib} PROPERTIES CUDA_ARCHITECTURES "${archs}")
  target_link_libraries(${lib} PUBLIC fa_common_cuda)
  # -lineinfo maps SASS back to source lines for Nsight Compute and compute-sanitizer, at no
  # runtime cost.
  target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>)

  add_executable(${name} ${CH_MAIN})
  target_link_libraries(${name} PRIVATE ${lib})

  add_executable(${name}_tests ${CH_GPU_TESTS})
  target_link_libraries(${name}_tests PRIVATE ${lib} fa_test_harness GTest::gtest_main)
  fa_register_gtests(${name}_tests ${name})

  add_executable(${name}_bench ${CH_BENCH})
  target_link_libraries(${name}_bench PRIVATE ${lib} fa_bench_harness)
endfunction()
