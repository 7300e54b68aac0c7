// Chapter 10: attention for decoding -- GQA packing and split-KV (Flash-Decoding).
#pragma once

#include "common/chapter.h"

namespace decoding {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (p.dtype: f16 or bf16, device)
// lse: [B, H, Sq] (float, device, natural log). Head dims 64 and 128; pointers 16-byte aligned; a
// GPU of compute capability 8.0 or newer. Any seqlen_q (decoding: 1-16) and seqlen_k. When the key
// range is split over several blocks, the partial results go to the project's grow-only scratch
// workspace (common/device_memory.h): allocated by the first call that needs it, reused after (one
// call in flight at a time, as for 01 and 02).
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

// The plan forward uses for p on this GPU (split_plan.h): how many pieces each key range is cut into.
struct Plan {
  int row_tiles;          // packed-row tiles per KV head
  std::int64_t tiles;     // blocks without a split: B Hkv row_tiles
  int splits, keys_per_split;
};
Plan plan(const fa::Problem& p);

const fa::Chapter& chapter();

}  // namespace decoding
