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
# `fa_kernels` builds every chapter library.

# Assignments (README: For teachers). With FA_STUDENT=ON each chapter's KERNELS and MODEL sources
# come from FA_STUDENT_DIR/<chapter>/, the student copy that scripts/make_student.py writes there at
# configure time (a file a student has edited is kept, never overwritten); the tests, the harness
# and everything else stay the repository's. FA_STUDENT_DIR comes first on the include path, so a
# student copy of a chapter header wins over the original.
option(FA_STUDENT "Build the student copies of the chapter kernels instead of the solutions" OFF)
set(FA_STUDENT_DIR "${CMAKE_BINARY_DIR}/student" CACHE PATH "Where the student copies live (FA_STUDENT)")
if(FA_STUDENT)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  message(STATUS "FA_STUDENT: building the student copies in ${FA_STUDENT_DIR}")
endif()
add_custom_target(fa_kernels)

# How the test binaries become ctest entries.
#
# By default a GPU test binary is a few ctest entries, not one per test case: each case as its own
# process would pay a process start, a CUDA context and the module loads (thousands of times), so
# the binary runs its cases in FA_TEST_SHARDS gtest shards (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX),
# one ctest entry each: `<chapter>.gpu.<k>of<N>`, labels `gpu` and `core`. A failing entry prints
# gtest's output, which names every failing case, and scripts/run_ctest.sh lists them. The cases
# come in two tiers (common/harness/test_cases.h): the entries above run the core tier; the full sweep's
# entries (`<chapter>.full.<k>of<N>`, labels `gpu` and `full`) exist only when ctest runs with
# FA_TEST_TIER=full in its environment (scripts/test.sh --full). The refusal tests of a GPU
# binary (no GPU needed) are one entry, `<chapter>.refusals`, label `cpu`; a CPU test binary is
# one entry, `<chapter>.cpu`. Every GPU entry takes one slot of the resource `gpus`
# (RESOURCE_GROUPS), so `ctest --resource-spec-file build/gpu_resources.json` keeps at most
# FA_GPU_JOBS of them on the GPU at once while the CPU tests use the other cores. A binary whose
# cases all skipped (no GPU) exits 77: the entry says "Skipped" (common/harness/gtest_main.cpp).
#
# FA_TESTS_PER_CASE (on for FA_STUDENT builds, which scripts/grade.sh grades case by case): one
# ctest entry per test case instead, listed when ctest starts (gtest_discover_tests, PRE_TEST), in
# the full tier, named `<chapter>.<suite>/<test>/<case>`.
option(FA_TESTS_PER_CASE "one ctest entry per test case (grading reads them) instead of a few shards per binary"
       ${FA_STUDENT})
set(FA_TEST_SHARDS 6 CACHE STRING "ctest entries (gtest shards) per GPU test binary and tier")
set(FA_GPU_JOBS 8 CACHE STRING "GPU test processes at once (gpu_resources.json's slots)")
if(FA_TESTS_PER_CASE)
  set(FA_TEST_TIER_DEFAULT full)
else()
  set(FA_TEST_TIER_DEFAULT core)
endif()
file(WRITE "${CMAKE_BINARY_DIR}/gpu_resources.json"
     "{\"version\": {\"major\": 1, \"minor\": 0}, \"local\": [{\"gpus\": [{\"id\": \"0\", \"slots\": ${FA_GPU_JOBS}}]}]}\n")

function(fa_label_directory label)
  get_property(labels DIRECTORY PROPERTY LABELS)
  if(NOT label IN_LIST labels)
    set_property(DIRECTORY APPEND PROPERTY LABELS ${label})
  endif()
endfunction()

# Labels: the folder's name (a directory label, so every test of the folder has it, also those
# added at ctest time) and `cpu` or `gpu`. Per case: one label per gtest_discover_tests call (CMake
# 3.25 keeps only the first element of a list there). NO_PRETTY_VALUES: a ctest name is the prefix
# and gtest's own name, the same on every CMake (`04_flash_v1.Shapes/Forward.MatchesReference/<case>`).
# SHARDS n: this binary's shards, where its cases take longer than most (08's backward). The
# shard count is also the entries' COST, so ctest starts the longest binaries' shards first.
function(fa_register_gtests target chapter)
  cmake_parse_arguments(REG "" "SHARDS" "" ${ARGN})
  set(shards ${FA_TEST_SHARDS})
  if(REG_SHARDS)
    set(shards ${REG_SHARDS})
  endif()
  fa_label_directory(${chapter})
  if(NOT FA_TESTS_PER_CASE)
    add_test(NAME ${chapter}.refusals COMMAND ${target} --gtest_filter=Inputs*)
    set_tests_properties(${chapter}.refusals PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
    math(EXPR last "${shards} - 1")
    set(full_tests "")
    foreach(k RANGE ${last})
      math(EXPR n "${k} + 1")
      set(shard "${n}of${shards}")
      add_test(NAME ${chapter}.gpu.${shard} COMMAND ${target} --gtest_filter=-Inputs*)
      set_tests_properties(${chapter}.gpu.${shard} PROPERTIES LABELS "gpu;core" SKIP_RETURN_CODE 77 COST ${shards}
        RESOURCE_GROUPS "gpus:1"
        ENVIRONMENT "FA_TEST_TIER=core;GTEST_TOTAL_SHARDS=${shards};GTEST_SHARD_INDEX=${k}")
      string(APPEND full_tests
        "  add_test([==[${chapter}.full.${shard}]==] [==[$<TARGET_FILE:${target}>]==] --gtest_filter=-Inputs*)\n"
        "  set_tests_properties([==[${chapter}.full.${shard}]==] PROPERTIES LABELS \"gpu;full\" SKIP_RETURN_CODE 77 COST ${shards}"
        " RESOURCE_GROUPS gpus:1 ENVIRONMENT \"FA_TEST_TIER=full;GTEST_TOTAL_SHARDS=${shards};GTEST_SHARD_INDEX=${k}\")\n")
    endforeach()
    # The full tier's entries, added by ctest itself when FA_TEST_TIER=full.
    set(full "${CMAKE_CURRENT_BINARY_DIR}/${target}_full_tier.cmake")
    file(GENERATE OUTPUT "${full}" CONTENT "if(\"\$ENV{FA_TEST_TIER}\" STREQUAL \"full\")\n${full_tests}endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${full}")
    return()
  endif()
  # Hidden test cases (FA_EXTRA_TESTS_DIR, common/harness/test_harness.cpp) change the list of tests
  # without changing the binary. CMake 4.x lists the tests at every ctest run; CMake 3.25 caches
  # the list until the binary is rebuilt, so this script, run by ctest first, drops the cached
  # list when the variable or the files it names change.
  set(check "${CMAKE_CURRENT_BINARY_DIR}/${target}_extra_cases.cmake")
  file(WRITE "${check}" "set(FA_TARGET_FILE_BASE [==[${CMAKE_CURRENT_BINARY_DIR}/${target}]==])\n"
                        "include([==[${PROJECT_SOURCE_DIR}/cmake/ExtraTestCases.cmake]==])\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${check}")
  # Refusal tests need no GPU, so they carry the cpu label even in a GPU test binary.
  gtest_discover_tests(${target}
    TEST_PREFIX "${chapter}."
    TEST_FILTER "Inputs*"
    PROPERTIES LABELS cpu SKIP_RETURN_CODE 77
    NO_PRETTY_VALUES
    DISCOVERY_MODE PRE_TEST)
  gtest_discover_tests(${target}
    TEST_PREFIX "${chapter}."
    TEST_FILTER "-Inputs*"
    PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
    NO_PRETTY_VALUES
    DISCOVERY_MODE PRE_TEST)
endfunction()

function(fa_add_cpu_test name)
  add_executable(${name}_cpu_tests ${ARGN})
  target_link_libraries(${name}_cpu_tests PRIVATE fa_common_cpu fa_gtest_main)
  fa_label_directory(${name})
  if(NOT FA_TESTS_PER_CASE)
    add_test(NAME ${name}.cpu COMMAND ${name}_cpu_tests)
    set_tests_properties(${name}.cpu PROPERTIES LABELS cpu)
    return()
  endif()
  gtest_discover_tests(${name}_cpu_tests
    TEST_PREFIX "${name}." PROPERTIES LABELS cpu NO_PRETTY_VALUES DISCOVERY_MODE PRE_TEST)
endfunction()

# With FA_STUDENT, writes the student copy of chapter `name` (once per configure) and points the
# source list in variable `var` at it; without, leaves the list alone.
function(fa_student_sources name var)
  if(NOT FA_STUDENT OR NOT ${var})
    return()
  endif()
  get_property(done GLOBAL PROPERTY fa_student_copy_${name})
  if(NOT done)
    execute_process(
      COMMAND "${Python3_EXECUTABLE}" "${PROJECT_SOURCE_DIR}/scripts/make_student.py" ${name}
              --out "${FA_STUDENT_DIR}" --quiet
      RESULT_VARIABLE status)
    if(status)
      message(FATAL_ERROR "${name}: scripts/make_student.py failed (the markers are named above)")
    endif()
    set_property(GLOBAL PROPERTY fa_student_copy_${name} TRUE)
  endif()
  set(sources ${${var}})
  list(TRANSFORM sources PREPEND "${FA_STUDENT_DIR}/${name}/")
  set(${var} ${sources} PARENT_SCOPE)
endfunction()

function(fa_add_chapter name)
  cmake_parse_arguments(CH "" "MIN_ARCH" "KERNELS;MODEL;CPU_TESTS;GPU_TESTS;BENCH;MAIN" ${ARGN})
  set(lib fa_${name})
  fa_student_sources(${name} CH_KERNELS)
  fa_student_sources(${name} CH_MODEL)  # identical to the repository's unless it has markers
  set(student_include "")
  if(FA_STUDENT)
    set(student_include "${FA_STUDENT_DIR}")
  endif()

  if(CH_MODEL)
    add_library(${lib}_model STATIC ${CH_MODEL})
    target_include_directories(${lib}_model BEFORE PUBLIC ${student_include})
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
  add_dependencies(fa_kernels ${lib})
  set_target_properties(${lib} PROPERTIES CUDA_ARCHITECTURES "${archs}")
  target_include_directories(${lib} BEFORE PUBLIC ${student_include})
  target_link_libraries(${lib} PUBLIC fa_common_cuda)
  # -lineinfo maps SASS back to source lines for Nsight Compute and compute-sanitizer, at no
  # runtime cost.
  target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo --expt-relaxed-constexpr>)

  add_executable(${name} ${CH_MAIN})
  target_link_libraries(${name} PRIVATE ${lib})

  add_executable(${name}_tests ${CH_GPU_TESTS})
  target_link_libraries(${name}_tests PRIVATE ${lib} fa_test_harness fa_gtest_main)
  fa_register_gtests(${name}_tests ${name})

  add_executable(${name}_bench ${CH_BENCH})
  target_link_libraries(${name}_bench PRIVATE ${lib} fa_bench_harness)
endfunction()
