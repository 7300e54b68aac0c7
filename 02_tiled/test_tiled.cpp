// Chapter 02 against the float64 reference on the shared shapes: ctest -L 02_tiled
#include "02_tiled/tiled.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(tiled::chapter());
