// Chapter 09 against the float64 reference on the shared shapes (both dtypes, D 64, 96, 128, 192 and 256), and
// the README's step-by-step versions on a few awkward shapes: ctest -L 09_flash_v3
#include "09_flash_v3/flash_v3.h"
#include "09_flash_v3/steps/steps.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(flash_v3::chapter());

FA_STEP_TESTS(flash_v3::steps::all());
