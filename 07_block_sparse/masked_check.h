// check_forward (forward_check.h) with an extra visibility rule: the verdict on a forward pass
// that computes only part of the attention matrix (chapter 07's block masks). The reference and
// the same-precision yardstick both see the same rule, on top of causal masking.
#pragma once

#include "common/host/forward_check.h"

namespace fa {

ForwardCheck check_forward_masked(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                                  const std::vector<std::uint8_t>& lse_bytes, const VisibleFn& visible);

}  // namespace fa
