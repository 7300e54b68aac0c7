// Chapter 10's paged KV cache (a step; README: "A paged cache"): the cache as fixed-size pages from
// one pool, named per sequence by a block table, as vLLM's PagedAttention and FlashAttention's
// `block_table` keep it. A sequence grows a page at a time; pages need not be contiguous or in order.
#pragma once

#include <vector>

#include "common/host/problem.h"
#include "common/host/reference.h"  // ScoreOptions

namespace decoding::steps {

// The pool: k_pages, v_pages are [num_pages, Hkv, page_size, D] in p.dtype on the device (a page
// holds page_size tokens of every KV head, each head's rows contiguous). Logical page n of
// sequence b (its tokens n page_size .. (n + 1) page_size - 1) is physical page
// block_table[b pages_per_seq + n]; entries past what a sequence uses are not read (-1 is fine).
struct PagedKVCache {
  void* k_pages;
  void* v_pages;
  int num_pages;
  int page_size;      // tokens per page: 16, 32, 64, 128 or 256
  int pages_per_seq;  // the block table's row length
  std::vector<int> block_table;  // [B, pages_per_seq], host
  std::vector<int> seqlens;      // [B], host: tokens already cached, before this step
};

// One decoding step, as decoding::forward_with_cache but with the paged cache: k_new and v_new
// ([B, Hkv, Sq, D]) go to tokens seqlens[b] .. seqlens[b] + Sq - 1 of sequence b's pages, then q
// attends to the sequence's seqlens[b] + Sq keys. Head dims 64 and 128, bf16 and f16. Refused
// (std::invalid_argument, naming the sequence and page) when a sequence needs more pages than its
// row holds, names a page outside the pool, or two (sequence, page) pairs in use name one page.
void forward_with_paged_cache(const fa::Problem& p, const void* q, const void* k_new, const void* v_new,
                              const PagedKVCache& cache, void* o, float* lse, const fa::ScoreOptions& options,
                              cudaStream_t stream);

}  // namespace decoding::steps
