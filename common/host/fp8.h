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

}  // namespace fa
