// The README's step-by-step versions: chapter 06's kernel with its ideas switched on one at a
// time (template switches of tensor_core.cuh's Config, not copies), bf16, D = 64 and 128; and the
// alternatives built from its tile functions: ping-pong (pingpong.cuh) and head dim 512, bf16 and
// f16 (split_d.cuh). Each is a Chapter, so the shared benchmark and test code run it like any
// chapter.
#pragma once

#include <string>
#include <vector>

#include "common/harness/chapter.h"

namespace tensor_core::steps {

using fa::Step;

const std::vector<Step>& all();

}  // namespace tensor_core::steps
