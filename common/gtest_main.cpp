// main() of every GPU test binary: gtest's, plus one exit status. A run in which no test passed
// and some were skipped (no GPU: every GPU case calls GTEST_SKIP) exits 77, which ctest reports
// as "Skipped" (SKIP_RETURN_CODE, cmake/Chapter.cmake), so a shard of many cases that all skipped
// is not counted as passed. Any failure still exits 1.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (status == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) return 77;
  return status;
}
