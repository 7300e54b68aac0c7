// Chapter 06 against the float64 reference on the shared shapes (both dtypes, every head dim),
// and the README's step-by-step versions on a few awkward shapes: ctest -L 06_tensor_core
#include "06_tensor_core/steps/steps.h"
#include "06_tensor_core/tensor_core.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(tensor_core::chapter());

FA_STEP_TESTS(tensor_core::steps::all());
