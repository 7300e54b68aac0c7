// Chapter 03 against the float64 reference on the shared shapes: ctest -L 03_online_softmax
#include "03_online_softmax/online_softmax.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(online_softmax::chapter());
