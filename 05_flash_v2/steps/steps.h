// The README's step-by-step versions: chapter 05's kernel with one of its changes since 04 switched
// off (steps.cu: one kernel over tile_math.cuh's device functions, with switches), f32. Each is a Chapter, so the
// shared benchmark and test code run it like any chapter.
#pragma once

#include <string>
#include <vector>

#include "common/chapter.h"

namespace flash_v2::steps {

using fa::Step;

const std::vector<Step>& all();

// A step past the chapter (steps/tf32x3.cu): both products on the tensor cores in 3xTF32.
Step tf32x3_step();
// Its forward (f32, head_dim up to 128): 08's fp32 tensor-core backward recomputes its scores.
void tf32x3_forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream);

}  // namespace flash_v2::steps
