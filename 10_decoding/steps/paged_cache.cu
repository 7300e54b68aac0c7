// Chapter 10's paged KV cache (steps/paged_cache.h): the checks of the pool and the block table, the
// paged append, and chapter 10's run() with the paged K/V copy.
#include "10_decoding/steps/paged_cache.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "10_decoding/launch.cuh"
#include "10_decoding/steps/paged_cache.cuh"

namespace decoding::steps {
namespace {

// The pages sequence b uses after this step, checked: every entry inside the pool, no page named twice.
void check_table(const fa::Problem& p, const PagedKVCache& cache) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("10_decoding (paged KV cache): " + what); };
  const int ps = cache.page_size;
  if (ps != 16 && ps != 32 && ps != 64 && ps != 128 && ps != 256)
    fail("page_size must be 16, 32, 64, 128 or 256 tokens, got " + std::to_string(ps));
  if (cache.num_pages < 1 || cache.pages_per_seq < 1) fail("num_pages and pages_per_seq must be >= 1");
  if (static_cast<int>(cache.seqlens.size()) != p.batch)
    fail("seqlens needs one length per sequence (" + std::to_string(p.batch) + "), got " +
         std::to_string(cache.seqlens.size()));
  if (cache.block_table.size() != static_cast<std::size_t>(p.batch) * cache.pages_per_seq)
    fail("block_table needs batch x pages_per_seq = " + std::to_string(std::int64_t{p.batch} * cache.pages_per_seq) +
         " entries, got " + std::to_string(cache.block_table.size()));
  std::vector<int> owner(cache.num_pages, -1);  // b * pages_per_seq + n of the (sequence, page) using it
  for (int b = 0; b < p.batch; ++b) {
    if (cache.seqlens[b] < 0) fail("sequence " + std::to_string(b) + " has a negative length");
    const std::int64_t tokens = std::int64_t{cache.seqlens[b]} + p.seqlen_q;
    const std::int64_t pages = (tokens + ps - 1) / ps;
    if (pages > cache.pages_per_seq)
      fail("sequence " + std::to_string(b) + " needs " + std::to_string(pages) + " pages for " + std::to_string(tokens) +
           " tokens (cached + seqlen_q), its block-table row holds " + std::to_string(cache.pages_per_seq));
    for (int n = 0; n < pages; ++n) {
      const int at = b * cache.pages_per_seq + n, page = cache.block_table[at];
      if (page < 0 || page >= cache.num_pages)
        fail("sequence " + std::to_string(b) + ", page " + std::to_string(n) + ": physical page " + std::to_string(page) +
             " is outside the pool of " + std::to_string(cache.num_pages));
      if (owner[page] >= 0)
        fail("physical page " + std::to_string(page) + " is used by sequence " + std::to_string(owner[page] / cache.pages_per_seq) +
             " (page " + std::to_string(owner[page] % cache.pages_per_seq) + ") and by sequence " + std::to_string(b) +
             " (page " + std::to_string(n) + ")");
      owner[page] = at;
    }
  }
}

template <class T, int kD, int kPageRows>
void run_paged(const fa::Problem& pk, const fa::Problem& p, const Params& base, const void* k_new, const void* v_new,
               const PagedKVCache& cache, const Extras& x, const int* cached, cudaStream_t stream) {
  const std::int64_t chunks = std::int64_t{p.batch} * p.kv_heads * p.seqlen_q * (kD * 2 / 16);
  append_paged_kernel<T, kD><<<fa::cuda::blocks_1d((chunks + 255) / 256, "10_decoding.paged (append)"), 256, 0, stream>>>(
      static_cast<const T*>(k_new), static_cast<const T*>(v_new), static_cast<T*>(cache.k_pages),
      static_cast<T*>(cache.v_pages), cached, x.block_table, cache.pages_per_seq, x.page_log2, p.kv_heads, p.seqlen_q, chunks);
  FA_CHECK_LAUNCH();
  run<T, kD, Paged<kPageRows>::template Kv>(pk, base, stream, x);
}

}  // namespace

void forward_with_paged_cache(const fa::Problem& p, const void* q, const void* k_new, const void* v_new,
                              const PagedKVCache& cache, void* o, float* lse, const fa::ScoreOptions& options,
                              cudaStream_t stream) {
  check_table(p, cache);
  std::vector<int> keys(p.batch);  // sequence b attends to its cached tokens and this step's
  for (int b = 0; b < p.batch; ++b) keys[b] = cache.seqlens[b] + p.seqlen_q;
  fa::Problem pk = p;  // as the kernel sees it: the longest sequence sizes the plan
  pk.seqlen_k = *std::max_element(keys.begin(), keys.end());
  static const fa::Support support{.chapter = "10_decoding.paged",
                                   .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                                   .head_dims = {64, 128},
                                   .max_head_dim = 128};
  fa::check_forward_args(support, pk, q, cache.k_pages, cache.v_pages, o, lse);
  if (!k_new || !v_new) throw std::invalid_argument("10_decoding (paged KV cache): k_new and v_new must not be null");
  if (!aligned16(k_new) || !aligned16(v_new))
    throw std::invalid_argument("10_decoding (paged KV cache): k_new and v_new must be 16-byte aligned");
  fa::check_score_options(pk, options, "10_decoding.paged");
  const Params base = fa2::make_params(pk, q, cache.k_pages, cache.v_pages, o, lse, "10_decoding.paged");
  const DeviceCopy<int> cached(cache.seqlens, stream), lengths(keys, stream), table(cache.block_table, stream);
  const DeviceCopy<float> slopes(options.alibi_slopes, stream), sinks(options.sink_logits, stream);
  int page_log2 = 0;
  while ((1 << page_log2) < cache.page_size) ++page_log2;
  const Extras x{.seqlens_k = lengths.get(),
                 .softcap = static_cast<float>(options.softcap),
                 .alibi_slopes = slopes.get(),
                 .sink_logits = sinks.get(),
                 .block_table = table.get(),
                 .pages_per_seq = cache.pages_per_seq,
                 .page_log2 = page_log2};
  auto by_page = [&](auto type, auto kd) {
    using T = decltype(type);
    constexpr int kD = decltype(kd)::value;
    if (cache.page_size == 16) run_paged<T, kD, 16>(pk, p, base, k_new, v_new, cache, x, cached.get(), stream);
    else if (cache.page_size == 32) run_paged<T, kD, 32>(pk, p, base, k_new, v_new, cache, x, cached.get(), stream);
    else run_paged<T, kD, 64>(pk, p, base, k_new, v_new, cache, x, cached.get(), stream);  // a tile in one page
  };
  auto by_dim = [&](auto type) {
    if (p.head_dim == 64) by_page(type, std::integral_constant<int, 64>{});
    else by_page(type, std::integral_constant<int, 128>{});
  };
  if (p.dtype == fa::Dtype::bf16) by_dim(__nv_bfloat16{});
  else by_dim(__half{});
}

}  // namespace decoding::steps
