// exp2 in one instruction, and the constants that move the softmax between e and 2. Taught in
// chapter 05 (exp2 with the scale folded in); used by 05, 06 and 08, and through 06's
// softmax_step by 07, 09 and 10. And the logit softcap's arithmetic (09, 11).
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

// Gemma 2's logit softcap (Problem::softcap), as 09's and 11's softcap kernels apply it to raw
// scores S = Q_i . K_j: out tanh(in S), in = scale / softcap and out = softcap / scale, so that the
// softmax's scale turns it into softcap tanh(scale S / softcap). inv_log2 = 1 / (softcap log2(e))
// brings the tanh back from a probability (11's cap_slope). The kernels take these as a parameter
// of their own, not inside their Params, whose size the other kernels' register allocation
// follows (12 more bytes in 11's cost its [B, H, S, D] kernels 8-40 bytes of spills).
struct SoftcapConsts {
  float in = 0, out = 0, inv_log2 = 0;
  static SoftcapConsts of(float scale, float softcap) {
    return {scale / softcap, softcap / scale, 1.0f / (softcap * kLog2e)};
  }
};
// A kernel without a softcap takes this empty parameter instead.
struct NoSoftcap {};

// One raw score through the softcap. tanhf, not an approximation: the float64 reference's
// tolerance is the dtype's.
__device__ __forceinline__ float capped(float s, const SoftcapConsts& cap) { return cap.out * tanhf(s * cap.in); }

}  // namespace fa::cuda
