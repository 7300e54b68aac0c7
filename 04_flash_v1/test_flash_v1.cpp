// Chapter 04 against the float64 reference on the shared shapes: ctest -L 04_flash_v1
#include "04_flash_v1/flash_v1.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(flash_v1::chapter());
