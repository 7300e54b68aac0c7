// Chapter 05 against the float64 reference on the shared shapes, and the README's step-by-step
// versions (steps.h) on a few awkward shapes: ctest -L 05_flash_v2
#include "05_flash_v2/flash_v2.h"
#include "05_flash_v2/steps/steps.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(flash_v2::chapter());  // 3xTF32 up to head dim 128, FFMA above

FA_FORWARD_SHAPE_TESTS(ForwardFfma, flash_v2::ffma_chapter());  // the FFMA kernel up to 128

FA_STEP_TESTS(flash_v2::steps::all());
