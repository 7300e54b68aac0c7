// exp2 in one instruction, and the constants that move the softmax between e and 2. Taught in
// chapter 05 (exp2 with the scale folded in); used by 05, 06 and 08, and through 06's
// softmax_step by 07, 09 and 10.
#pragma once

#include "common/device/constants.h"

namespace fa::cuda {

// 2^x in one MUFU.EX2 instruction (relative error ~2^-22; denormal results flush to 0, far below
// what a softmax term can matter). exp2f() without --use_fast_math adds range fix-ups around it.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace fa::cuda
