// Chapter 10: attention for decoding -- GQA packing and split-KV (Flash-Decoding).
#pragma once

#include <vector>

#include "common/harness/chapter.h"
#include "common/host/reference.h"  // ScoreOptions

namespace decoding {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (p.dtype: f16 or bf16, device)
// lse: [B, H, Sq] (float, device, natural log). Head dims 64, 128 and 256; pointers 16-byte aligned; a
// GPU of compute capability 8.0 or newer. Any seqlen_q (decoding: 1-16) and seqlen_k. When the key
// range is split over several blocks, the partial results go to the project's grow-only scratch
// workspace (common/cuda/device_memory.h): allocated by the first call that needs it, reused after (one
// call in flight at a time, as for 01 and 02).
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

// forward with the score options of common/host/reference.h: a logit softcap, and per query head ALiBi
// slopes and attention-sink logits (host vectors of H values, or empty: off). Checked; copied to
// the device on `stream`.
void forward_with_options(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                          const fa::ScoreOptions& options, cudaStream_t stream);

// A KV cache: K and V of sequence b in rows 0 .. seqlens[b] - 1 of each (b, KV head) of k and v,
// [B, Hkv, capacity, D] in p.dtype on the device.
struct KVCache {
  void* k;
  void* v;
  int capacity;
  std::vector<int> seqlens;  // [B], on the host: tokens already cached, before this step
};

// One decoding step with a cache: writes k_new and v_new ([B, Hkv, Sq, D]) into the cache after
// each sequence's seqlens[b] tokens (the caller advances seqlens by Sq afterwards), then attends q
// ([B, H, Sq, D]) to sequence b's seqlens[b] + Sq keys, bottom-right causal when p.causal (the
// step's tokens see the cache and each other in order). p gives B, H, Hkv, Sq, D, causal, dtype
// and scale; p.seqlen_k is not used (the lengths are). Refused unless 0 <= seqlens[b] <=
// capacity - Sq for every b.
void forward_with_cache(const fa::Problem& p, const void* q, const void* k_new, const void* v_new, const KVCache& cache,
                        void* o, float* lse, const fa::ScoreOptions& options, cudaStream_t stream);

// The plan forward uses for p on this GPU (split_plan.h): how many pieces each key range is cut into.
struct Plan {
  int row_tiles;          // packed-row tiles per KV head
  std::int64_t tiles;     // blocks without a split: B Hkv row_tiles
  int splits, keys_per_split;
};
Plan plan(const fa::Problem& p);

const fa::Chapter& chapter();

}  // namespace decoding
