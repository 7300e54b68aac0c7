# Run by ctest (a TEST_INCLUDE_FILES script of every GPU test binary, cmake/Chapter.cmake) before
# gtest_discover_tests' own script. The hidden cases of FA_EXTRA_TESTS_DIR become test cases when
# the binary lists its tests, and gtest_discover_tests lists them again only when the binary is
# newer than the cached list. So: fingerprint the variable and the contents of its *.txt files,
# and when the fingerprint changes, delete the cached lists; ctest then lists the tests afresh.
# FA_TARGET_FILE_BASE: <binary dir>/<test target>.
set(fingerprint "$ENV{FA_EXTRA_TESTS_DIR}")
if(fingerprint)
  file(GLOB files "$ENV{FA_EXTRA_TESTS_DIR}/*.txt")
  list(SORT files)
  foreach(f IN LISTS files)
    file(SHA1 "${f}" hash)
    string(APPEND fingerprint ";${f}=${hash}")
  endforeach()
endif()
set(stamp "${FA_TARGET_FILE_BASE}_extra_cases.stamp")
set(previous "")
if(EXISTS "${stamp}")
  file(READ "${stamp}" previous)
endif()
if(NOT previous STREQUAL fingerprint)
  # gtest_discover_tests' lists: <target>[N]_tests.cmake (multi-config: <target>[N]_tests-<config>.cmake)
  file(GLOB cached "${FA_TARGET_FILE_BASE}*_tests*.cmake")
  if(cached)
    file(REMOVE ${cached})
  endif()
  file(WRITE "${stamp}" "${fingerprint}")
endif()
