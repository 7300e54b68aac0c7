// Chapter 08's backward against the float64 reference on the shared shapes: ctest -L 08_backward
#include "08_backward/backward.h"
#include "common/backward_harness.h"

FA_BACKWARD_TESTS(backward::chapter());
