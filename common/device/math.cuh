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

// 1 / x in one MUFU.RCP instruction (relative error ~2^-23; 1 / inf = 0). The softcap below calls
// it on 1 + 2^y >= 1 only, so flushing denormals never comes into play.
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// log2(x) in one MUFU.LG2 instruction (absolute error ~2^-22 near 1, relative elsewhere; 0 and
// denormals give -inf, a negative x NaN).
__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Gemma 2's logit softcap (Problem::softcap), as 09's and 11's softcap kernels apply it to raw
// scores S = Q_i . K_j: out tanh(scale S / softcap) with out = softcap / scale, so that the
// softmax's scale turns it into softcap tanh(scale S / softcap). in2 = 2 log2(e) scale / softcap
// feeds capped's exponential; inv_log2 = 1 / (softcap log2(e)) brings the tanh back from a
// probability (11's cap_slope). The kernels take these as a parameter of their own, not inside
// their Params, whose size the other kernels' register allocation follows (12 more bytes in 11's
// cost its [B, H, S, D] kernels 8-40 bytes of spills).
struct SoftcapConsts {
  float in2 = 0, out = 0, inv_log2 = 0;
  static SoftcapConsts of(float scale, float softcap) {
    return {2.0f * kLog2e * scale / softcap, softcap / scale, 1.0f / (softcap * kLog2e)};
  }
};
// A kernel without a softcap takes this empty parameter instead.
struct NoSoftcap {};

// One raw score through the softcap: tanh(y) = 1 - 2 / (1 + e^(2y)), an exponential and a
// reciprocal (two MUFU instructions and three others). tanhf() costs the same two MUFU
// instructions and a dozen more (a polynomial for small |y|, range checks), and the softcap runs on
// every score, next to the softmax's own exponential. The result is off tanh by ~1e-7 absolute:
// relative accuracy is lost only where |tanh| is below ~1e-4, where the capped score is within
// ~1e-7 softcap / scale of its exact value either way, far below what the dtypes resolve.
// e^(2y) = inf gives out, 0 gives -out; a NaN score stays NaN.
__device__ __forceinline__ float capped(float s, const SoftcapConsts& cap) {
  const float r = fast_rcp(1.0f + fast_exp2(s * cap.in2));
  return fmaf(r, -2.0f * cap.out, cap.out);
}

}  // namespace fa::cuda
