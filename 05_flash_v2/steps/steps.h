// The README's step-by-step versions: chapter 05's kernel with one of its changes since 04 switched
// off (steps.cu: one kernel over tile_math.cuh's device functions, with switches), f32. Each is a Chapter, so the
// shared benchmark and test code run it like any chapter.
#pragma once

#include <string>
#include <vector>

#include "common/harness/chapter.h"

namespace flash_v2::steps {

using fa::Step;

const std::vector<Step>& all();

}  // namespace flash_v2::steps
