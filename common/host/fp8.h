// FP8 E4M3 on the host: the encoding chapter 09's FP8 step (09_flash_v3/steps/) feeds the tensor
// cores, and per-tensor quantization as FlashAttention-3's FP8 forward takes its inputs.
//
// E4M3 (the OCP format NVIDIA calls e4m3, PTX's .e4m3, CUDA's __nv_fp8_e4m3): 1 sign bit, 4
// exponent bits (bias 7), 3 mantissa bits. No infinities; 0x7F and 0xFF are NaN, so the largest
// finite value is 1.75 x 2^8 = 448 (0x7E). Normal numbers from 2^-6, subnormals m x 2^-9 (m = 1..7).
// Three mantissa bits: a rounding error of up to 2^-4 of the value (half of one step of 2^-3).
//
// float_to_e4m3_bits rounds to nearest, ties to even, and saturates: beyond 448 (infinities
// included) it gives +-448, as the device's cvt.rn.satfinite.e4m3x2.f32 does; NaN gives NaN.
// Written out here so that the CPU build needs no CUDA; test_fp8.cpp checks every code.
#pragma once

#include <cstdint>
#include <vector>

#include "common/host/problem.h"
#include "common/host/reference.h"

namespace fa {

constexpr float kE4m3Max = 448.0f;

std::uint8_t float_to_e4m3_bits(float x);
float e4m3_bits_to_float(std::uint8_t bits);
inline float round_to_e4m3(float x) { return e4m3_bits_to_float(float_to_e4m3_bits(x)); }

// One tensor in E4M3 with one scale: element i stands for scale x e4m3(bits[i]). quantize_e4m3
// takes scale = max |x| / 448, so the largest element lands on 448 and none saturates (1 for a
// tensor of zeros); dequantize gives the values the tensor stands for.
struct E4m3Tensor {
  std::vector<std::uint8_t> bits;
  float scale = 1.0f;
};
E4m3Tensor quantize_e4m3(const std::vector<float>& x);
std::vector<float> dequantize(const E4m3Tensor& t);

// The yardstick of the FP8 forward's tolerance (chapter 09's step v6_fp8; FlashAttention's
// same-precision rule of compare.h with FP8's own plain implementation): q, k, v are the values
// the E4M3 tensors stand for (dequantize), S and the softmax in float32, each P = exp(S - max)
// rounded to E4M3 as it goes into P V, O = (sum of P v) / l in float32 with l the sum of the
// unrounded P, rounded to f16 (the step's O); LSE float32. [B, H, S, D] problems, causal or not,
// GQA; no window, softcap or packed batch (std::invalid_argument).
//
// Why a measured yardstick rather than a fixed tolerance: three mantissa bits put each P off by up
// to 2^-4 of itself (below 2^-6, by up to 2^-10 absolutely), and how much of that reaches O depends
// on how a row's weight spreads over its keys. A row dominated by one key (its P = 1, exact) gets
// almost none; a row spread evenly over n keys gets about 2^-4 |v| / sqrt(3 n); a bound for every
// row (2^-4 max |v|, plus n 2^-10 max |v| / l for the subnormals) is too loose to catch a wrong
// key. The plain implementation's error on the same inputs is tight for every shape. A kernel
// rounds P tile by tile against the running max instead of the final one, an equally good order of
// rounding: the rule's factor 2 covers that.
ReferenceForward fp8_plain_forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v);

}  // namespace fa
