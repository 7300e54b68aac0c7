// main() of every test binary: gtest's, plus two things for scripts/run_ctest.sh.
//  * A run in which no test passed and some were skipped (no GPU: every GPU case calls GTEST_SKIP)
//    exits 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE, cmake/Chapter.cmake), so a
//    shard of many cases that all skipped is not counted as passed. Any failure still exits 1.
//  * With FA_CASE_COUNTS=FILE, it appends "passed failed skipped" (test cases) to FILE, so that a
//    run of a few ctest entries can still say how many cases passed.
//  * With FA_CASE_TIMES=FILE, it appends "milliseconds binary case" per test case that ran, so
//    that run_ctest.sh can name the slowest cases (what a shorter test tier would cut).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  // A listing (--gtest_list_tests: ctest's test discovery, scripts/check_todos.py) runs no case,
  // yet gtest counts its cases as successful: it reports no counts.
  bool listing = false;
  for (int n = 1; n < argc; ++n) listing = listing || std::strcmp(argv[n], "--gtest_list_tests") == 0;
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (const char* path = std::getenv("FA_CASE_COUNTS"); !listing && path != nullptr && *path != '\0') {
    if (std::FILE* f = std::fopen(path, "a")) {  // one short write: appends from parallel entries stay whole
      std::fprintf(f, "%d %d %d\n", run.successful_test_count(), run.failed_test_count(), run.skipped_test_count());
      std::fclose(f);
    }
  }
  if (const char* path = std::getenv("FA_CASE_TIMES"); !listing && path != nullptr && *path != '\0') {
    const char* slash = std::strrchr(argv[0], '/');
    const std::string binary = slash ? slash + 1 : argv[0];
    std::string lines;
    for (int i = 0; i < run.total_test_suite_count(); ++i) {
      const ::testing::TestSuite& suite = *run.GetTestSuite(i);
      for (int j = 0; j < suite.total_test_count(); ++j) {
        const ::testing::TestInfo& info = *suite.GetTestInfo(j);
        if (!info.should_run()) continue;
        lines += std::to_string(info.result()->elapsed_time()) + " " + binary + " " + suite.name() + "." + info.name() + "\n";
      }
    }
    if (std::FILE* f = std::fopen(path, "a")) {  // one buffered write, as above
      std::setvbuf(f, nullptr, _IOFBF, lines.size() + 1);
      std::fwrite(lines.data(), 1, lines.size(), f);
      std::fclose(f);
    }
  }
  if (status == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) return 77;
  return status;
}
