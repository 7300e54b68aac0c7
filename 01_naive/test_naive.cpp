// Chapter 01 against the float64 reference on the shared shapes: ctest -L 01_naive
#include "01_naive/naive.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(naive::chapter());
