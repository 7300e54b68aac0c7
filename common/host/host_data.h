// Host-side data: seeded random inputs, and the fp16/bf16 encodings the GPU uses.
//
// Inputs are drawn in float, then rounded to the problem's dtype, and the rounded values are
// what both the GPU and the reference see: input rounding is not an error of the kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "common/host/problem.h"

namespace fa {

// IEEE binary16 and bfloat16 bit patterns, round-to-nearest-even (as __float2half_rn and
// __float2bfloat16_rn do on the device). Written out here so the CPU build needs no CUDA.
std::uint16_t float_to_half_bits(float x);
float half_bits_to_float(std::uint16_t h);
std::uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(std::uint16_t b);
float round_to_dtype(float x, Dtype dtype);

// Bytes as the device holds them (dtype_size(dtype) per element), and back.
std::vector<std::uint8_t> encode(const std::vector<float>& values, Dtype dtype);
std::vector<float> decode(const std::vector<std::uint8_t>& bytes, Dtype dtype);

// A tensor's bytes (elem bytes an element) moved between [B, H, S, D] and [B, S, H, D]: the inputs
// go to a chapter in the problem's layout, its output comes back to the reference's [B, H, S, D].
// bhsd to bhsd is a copy.
std::vector<std::uint8_t> to_layout(const std::vector<std::uint8_t>& bhsd, Layout layout, std::size_t elem, int batch,
                                    int heads, int seqlen, int dim);
std::vector<std::uint8_t> from_layout(const std::vector<std::uint8_t>& bytes, Layout layout, std::size_t elem, int batch,
                                      int heads, int seqlen, int dim);
// The same for one of p's tensors in p.dtype, sized by which one it is: Q and dQ (H heads, Sq rows,
// D), O and dO (H, Sq, Dv), K and dK (Hkv, Sk, D), V and dV (Hkv, Sk, Dv).
enum class Operand { q, o, k, v };
std::vector<std::uint8_t> to_layout(const std::vector<std::uint8_t>& bhsd, const Problem& p, Operand which);
std::vector<std::uint8_t> from_layout(const std::vector<std::uint8_t>& bytes, const Problem& p, Operand which);

// A fused QKV projection's output, [B, S, H + 2 Hkv, D]: each row holds Q's H heads, then K's Hkv,
// then V's Hkv (Sq = Sk and one head dim). fused_qkv packs Q, K, V from their [B, H, S, D] bytes;
// set_fused_qkv gives p that layout (bshd) and the slices' input strides (Problem::q_input, k_input,
// v_input), and fused_qkv_offsets says where each slice starts, in elements.
std::vector<std::uint8_t> fused_qkv(const std::vector<std::uint8_t>& q, const std::vector<std::uint8_t>& k,
                                    const std::vector<std::uint8_t>& v, const Problem& p);
void set_fused_qkv(Problem& p);
struct FusedOffsets {
  std::int64_t q, k, v;
};
FusedOffsets fused_qkv_offsets(const Problem& p);

// Every output byte is set to 0xFF before a kernel runs. 0xFF.. is a NaN in f32, f16 and bf16,
// and no arithmetic produces that exact pattern (CUDA's NaNs are 0x7FFF..), so an element still
// holding it was never written.
constexpr std::uint8_t kPoisonByte = 0xFF;
bool is_poison(const std::uint8_t* element, Dtype dtype);

// Counter-based standard normal numbers: element n of stream `seed` is the same on every
// platform and compiler (std::normal_distribution is not), so a failing case can be replayed.
float seeded_normal(std::uint64_t seed, std::uint64_t n);
std::vector<float> random_normal(std::int64_t count, std::uint64_t seed, Dtype dtype);

struct HostInputs {
  std::vector<float> q;  // [B, H, Sq, D]
  std::vector<float> k;  // [B, Hkv, Sk, D]
  std::vector<float> v;  // [B, Hkv, Sk, D]
};

// What the scores scale * Q K^T look like. Standard-normal Q, K, V give scores of size ~1; the
// others are the numerically hard cases every kernel must survive (the shared test sweep runs
// each of them in every dtype):
//   large_logits     Q, K with standard deviation 12: scores ~ +-150 at any head dim, so a row's
//                    softmax is nearly one-hot and exp() sees huge arguments; any inconsistency
//                    between a forward's LSE and a backward's recomputed scores shows.
//   tiny_logits      Q, K with standard deviation 1e-3: scores ~ 1e-6, a near-uniform softmax.
//   constant_scores  every key row of a (batch, KV head) equal to its first one: every score of a
//                    query row is the same, so every key ties for the max and P = 1 / (keys seen).
//   rare_spikes      normal inputs, but about one key in 40 scaled by 16: scores ~ +-16 on a
//                    few keys, the running max jumps late in the row and O must be rescaled.
enum class InputKind { normal, large_logits, tiny_logits, constant_scores, rare_spikes };
const char* input_kind_name(InputKind kind);  // "normal", "large_logits", ...

// Q, K, V of problem p drawn from stream `seed`, shaped by `kind`, rounded to p.dtype.
HostInputs make_inputs(const Problem& p, std::uint64_t seed, InputKind kind = InputKind::normal);

}  // namespace fa
