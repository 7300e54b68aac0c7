// The README's steps of chapter 11 against the float64 reference (08's backward harness, a few
// shapes a step: GQA causal, Sq != Sk): ctest -L 11_backward_v3.
#include "08_backward/harness/backward_harness.h"
#include "11_backward_v3/steps/steps.h"

FA_BACKWARD_STEP_TESTS(backward_v3::steps::all());
