// Chapter 05 against the float64 reference on the shared shapes, and the README's step-by-step
// versions (steps.h) on a few awkward shapes: ctest -L 05_flash_v2
#include "05_flash_v2/flash_v2.h"
#include "05_flash_v2/steps/steps.h"
#include "common/test_harness.h"

FA_FORWARD_TESTS(flash_v2::chapter());

FA_STEP_TESTS(flash_v2::steps::all());
