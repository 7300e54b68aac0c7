// The whole verdict on one forward pass, shared by the runner and the test harness: O and LSE
// against the float64 reference, and FlashAttention's same-precision rule (every dtype: for f32
// the yardstick is a plain fp32 implementation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/host/compare.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace fa {

struct ForwardCheck {
  CompareReport o;
  CompareReport lse;
  std::optional<SamePrecisionCheck> same_precision;  // set by check_forward, for every dtype

  bool pass() const { return o.pass() && lse.pass() && (!same_precision || same_precision->pass()); }
  std::string summary() const;  // a few lines
};

// `o_bytes` and `lse_bytes` are the device's outputs as raw bytes (O in p.dtype, LSE float).
// `options`: the score options the kernel applied (reference.h), none by default.
ForwardCheck check_forward(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                           const std::vector<std::uint8_t>& lse_bytes, const ScoreOptions& options = {});

// The FP8 forward's verdict (chapter 09's step v6_fp8), as check_forward's: `in` holds the values
// the E4M3 inputs stand for (fp8.h: dequantize), O is f16 (p.dtype), and the same-precision rule's
// yardstick is FP8's plain implementation (fp8.h: fp8_plain_forward, which says why).
ForwardCheck check_forward_fp8(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                               const std::vector<std::uint8_t>& lse_bytes);

}  // namespace fa
