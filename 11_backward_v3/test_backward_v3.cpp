// Chapter 11's backward against the float64 reference on the shared shapes (08's backward harness:
// seqlen 1 .. 1013, Sq != Sk both ways, MHA / GQA / MQA, causal and not, the hard inputs, the
// long-context large-logit cases and grids past 65,535 blocks), bf16 and f16 at head dims 64, 96
// and 128: ctest -L 11_backward_v3. The GPU cases skip, saying why, on a GPU other than Hopper.
#include "08_backward/harness/backward_harness.h"
#include "11_backward_v3/backward_v3.h"

FA_BACKWARD_TESTS(backward_v3::chapter());
