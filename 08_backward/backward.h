// Chapter 08: FlashAttention-2's backward pass -- one block per key tile, dK_j and dV_j in
// registers, P_ij recomputed from the forward's LSE, dQ_i accumulated with atomics; fp32 FFMA.
#pragma once

#include "common/backward.h"

namespace backward {

// q, o, dout, dq: [B, H, Sq, D]   k, v, dk, dv: [B, Hkv, Sk, D]   (float, device)
// lse: [B, H, Sq] (float, device) as the forward wrote it: natural log, +inf for a row that
// sees no key. dk and dv are summed over the H / Hkv query heads sharing a KV head. Any
// head_dim up to 128. Scratch: B * H * Sq floats (D_i) in fa::cuda::workspace.
void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream);

// The backward with 05_flash_v2's forward (which writes the O and LSE it needs).
const fa::BackwardChapter& chapter();

}  // namespace backward
