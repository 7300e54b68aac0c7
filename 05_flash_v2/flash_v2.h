// Chapter 05: FlashAttention-2's forward -- one block per query tile, O_i in registers, fp32 FFMA.
#pragma once

#include "common/chapter.h"

namespace flash_v2 {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Any head_dim up to 128; no scratch memory.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

// The changes since 04 that the kernel can switch off one at a time (`if constexpr` in
// flash_v2.cu), for the README's step-by-step table (steps.h). Config<> is the chapter's kernel.
template <bool kSkipCausalTiles_ = true, bool kExp2_ = true, bool kNormalizeOnce_ = true,
          bool kOverlapCopies_ = true, bool kInterleavedLanes_ = true>
struct Config {
  static constexpr bool kSkipCausalTiles = kSkipCausalTiles_;    // off: all key tiles, all causal masked
  static constexpr bool kExp2 = kExp2_;                          // off: natural-log S, p = expf(s - m)
  static constexpr bool kNormalizeOnce = kNormalizeOnce_;        // off: O_i / l_i after every tile (04)
  static constexpr bool kOverlapCopies = kOverlapCopies_;        // off: copy K_j, V_j, wait, compute
  static constexpr bool kInterleavedLanes = kInterleavedLanes_;  // off: (ty, tx) = (lane / 8, lane % 8)
};

// The README's steps: the chapter's kernel with one change switched off.
using NoCausalSkip = Config<false, true, true, true, true>;
using Expf = Config<true, false, true, true, true>;
using NormalizeEachTile = Config<true, true, false, true, true>;
using NoCopyOverlap = Config<true, true, true, false, true>;
using PlainLanes = Config<true, true, true, true, false>;

// forward() on the kernel built as C; flash_v2.cu instantiates it for Config<> and the steps above.
template <class C>
void forward_with(const fa::Problem& p, const void* q, const void* k, const void* v, void* o,
                  float* lse, cudaStream_t stream);

}  // namespace flash_v2
