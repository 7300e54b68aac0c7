// Chapter 10's paged KV cache (steps/paged_cache.h): one decoding step through a block table of
// shuffled pages must append exactly where the table says and give the same O and LSE, bit for bit,
// as the contiguous cache (decoding::forward_with_cache, itself checked against the float64
// reference in test_cache_options.cpp) holding the same tokens; and match that reference itself.
// ctest -L 10_decoding
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "10_decoding/cache_checks.h"
#include "10_decoding/decoding.h"
#include "10_decoding/steps/paged_cache.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"
#include "common/harness/test_cases.h"

namespace {

using fa::testing::download_guarded;
using fa::testing::kGuardBytes;

struct PagedCase {
  int heads, kv_heads, seqlen_q, page_size;
  std::vector<int> cached;  // per sequence, before the step
  bool causal, options;
  int head_dim;
  fa::Dtype dtype;
  std::string name;
};
void PrintTo(const PagedCase& c, std::ostream* os) { *os << c.name; }

std::vector<PagedCase> paged_cases() {
  struct Base {
    int heads, kv_heads, seqlen_q;
    std::vector<int> cached;
    bool causal;
    const char* name;
  };
  // Lengths that end inside a page and on its last token, an empty cache, a long sequence next to
  // a short one (the short one's pieces see no key), speculative steps under causal masking.
  const std::vector<Base> bases = {{8, 2, 1, {0, 17, 255}, false, "ragged3_Sq1"},
                                   {32, 8, 4, {4092, 1000}, true, "Sq4_causal"},
                                   {32, 8, 1, {40000, 3}, false, "long_and_short"}};
  std::vector<PagedCase> cases;
  const bool full = fa::testing::test_tier() == fa::testing::Tier::full;
  for (const Base& b : bases)
    for (int page : {16, 32, 64, 256})
      for (int d : {64, 128}) {
        // core: the 40,000-key cache at two of the eight (page, D); the other bases run all eight.
        if (!full && std::string(b.name) == "long_and_short" && !(page == 64 && d == 128) && !(page == 32 && d == 64))
          continue;
        const bool options = d == 128;  // the softcap, ALiBi and sinks ride along at D = 128
        const fa::Dtype dtype = page == 32 ? fa::Dtype::f16 : fa::Dtype::bf16;
        cases.push_back({b.heads, b.kv_heads, b.seqlen_q, page, b.cached, b.causal, options, d, dtype,
                         std::string(b.name) + "_page" + std::to_string(page) + "_D" + std::to_string(d) +
                             (options ? "_options_" : "_") + fa::dtype_name(dtype)});
      }
  return cases;
}

fa::ScoreOptions all_options(int heads, std::uint64_t seed) {
  fa::ScoreOptions o;
  o.softcap = 2.0;
  for (int h = 0; h < heads; ++h) {
    o.alibi_slopes.push_back(std::exp2(-8.0f * (h + 1) / heads));
    o.sink_logits.push_back(2.0f * fa::seeded_normal(seed, h));
  }
  return o;
}

class Paged : public ::testing::TestWithParam<PagedCase> {};

TEST_P(Paged, MatchesTheContiguousCache) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const PagedCase& c = GetParam();
  const int B = static_cast<int>(c.cached.size()), D = c.head_dim, Hkv = c.kv_heads, P = c.page_size;
  fa::Problem p;
  p.batch = B, p.heads = c.heads, p.kv_heads = Hkv, p.seqlen_q = c.seqlen_q, p.seqlen_k = 1;
  p.head_dim = D, p.causal = c.causal, p.dtype = c.dtype;
  const std::uint64_t seed = fa::testing::seed_of(c.name);
  const std::size_t elem = fa::dtype_size(p.dtype);

  // The block table: each sequence's pages after the step, drawn from a shuffled pool with spare
  // pages, so that no sequence's pages are contiguous or in order; unused entries -1.
  int pages_per_seq = 0;
  for (int b = 0; b < B; ++b) pages_per_seq = std::max(pages_per_seq, (c.cached[b] + c.seqlen_q + P - 1) / P);
  pages_per_seq += 1;  // a spare entry per row
  int used = 0;
  for (int b = 0; b < B; ++b) used += (c.cached[b] + c.seqlen_q + P - 1) / P;
  const int num_pages = used + 3;
  std::vector<int> pool(num_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(static_cast<unsigned>(seed)));
  std::vector<int> table(static_cast<std::size_t>(B) * pages_per_seq, -1);
  for (int b = 0, next = 0; b < B; ++b)
    for (int n = 0; n < (c.cached[b] + c.seqlen_q + P - 1) / P; ++n) table[b * pages_per_seq + n] = pool[next++];

  // The pool's contents (random, every page), and the contiguous cache of capacity pages_per_seq P
  // that holds the same tokens: row t of (b, h) is row t mod P of (page table[b][t / P], h).
  const int capacity = pages_per_seq * P;
  const std::int64_t pool_elems = std::int64_t{num_pages} * Hkv * P * D;
  const std::int64_t cache_elems = std::int64_t{B} * Hkv * capacity * D;
  const std::int64_t new_elems = std::int64_t{B} * Hkv * c.seqlen_q * D;
  const std::vector<float> q = fa::random_normal(p.q_elems(), seed, p.dtype);
  const std::vector<float> k_pool = fa::random_normal(pool_elems, seed + 1, p.dtype);
  const std::vector<float> v_pool = fa::random_normal(pool_elems, seed + 2, p.dtype);
  const std::vector<float> k_new = fa::random_normal(new_elems, seed + 3, p.dtype);
  const std::vector<float> v_new = fa::random_normal(new_elems, seed + 4, p.dtype);
  auto pool_row = [&](int page, int h, int r) { return ((std::int64_t{page} * Hkv + h) * P + r) * D; };
  auto cache_row = [&](int b, int h, int t) { return ((std::int64_t{b} * Hkv + h) * capacity + t) * D; };
  std::vector<float> k_cache(cache_elems, 0.0f), v_cache(cache_elems, 0.0f);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hkv; ++h)
      for (int t = 0; t < capacity; ++t) {
        const int page = table[b * pages_per_seq + t / P];
        if (page < 0) continue;
        std::copy_n(&k_pool[pool_row(page, h, t % P)], D, &k_cache[cache_row(b, h, t)]);
        std::copy_n(&v_pool[pool_row(page, h, t % P)], D, &v_cache[cache_row(b, h, t)]);
      }
  // What the pool must hold after the step: this step's tokens at their pages.
  std::vector<float> k_pool_after = k_pool, v_pool_after = v_pool;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hkv; ++h)
      for (int i = 0; i < c.seqlen_q; ++i) {
        const int t = c.cached[b] + i, page = table[b * pages_per_seq + t / P];
        const std::int64_t src = ((std::int64_t{b} * Hkv + h) * c.seqlen_q + i) * D;
        std::copy_n(&k_new[src], D, &k_pool_after[pool_row(page, h, t % P)]);
        std::copy_n(&v_new[src], D, &v_pool_after[pool_row(page, h, t % P)]);
      }
  const fa::ScoreOptions opt = c.options ? all_options(c.heads, seed + 5) : fa::ScoreOptions{};

  fa::cuda::DeviceBuffer q_d(p.q_elems() * elem), kp(pool_elems * elem), vp(pool_elems * elem);
  fa::cuda::DeviceBuffer kc(cache_elems * elem), vc(cache_elems * elem), kn(new_elems * elem), vn(new_elems * elem);
  fa::cuda::DeviceBuffer o(p.o_elems() * elem + kGuardBytes), lse(p.lse_elems() * sizeof(float) + kGuardBytes);
  q_d.upload(fa::encode(q, p.dtype));
  kp.upload(fa::encode(k_pool, p.dtype));
  vp.upload(fa::encode(v_pool, p.dtype));
  kc.upload(fa::encode(k_cache, p.dtype));
  vc.upload(fa::encode(v_cache, p.dtype));
  kn.upload(fa::encode(k_new, p.dtype));
  vn.upload(fa::encode(v_new, p.dtype));
  const decoding::steps::PagedKVCache paged{kp.get(), vp.get(), num_pages, P, pages_per_seq, table, c.cached};
  const decoding::KVCache contiguous{kc.get(), vc.get(), capacity, c.cached};
  const fa::cuda::Stream stream;
  auto run = [&](bool use_pages) {
    o.poison(stream.get());
    lse.poison(stream.get());
    if (use_pages)
      decoding::steps::forward_with_paged_cache(p, q_d.get(), kn.get(), vn.get(), paged, o.get(), lse.as<float>(), opt,
                                                stream.get());
    else
      decoding::forward_with_cache(p, q_d.get(), kn.get(), vn.get(), contiguous, o.get(), lse.as<float>(), opt,
                                   stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    return std::vector<std::vector<std::uint8_t>>{download_guarded(o, "O"), download_guarded(lse, "LSE")};
  };
  const auto pages1 = run(true), pages2 = run(true), rows = run(false);
  EXPECT_TRUE(pages1 == pages2) << "O or LSE differs between two identical calls";
  EXPECT_TRUE(kp.download() == fa::encode(k_pool_after, p.dtype)) << "K pages: not exactly the old tokens + k_new at their pages";
  EXPECT_TRUE(vp.download() == fa::encode(v_pool_after, p.dtype)) << "V pages: not exactly the old tokens + v_new at their pages";
  EXPECT_TRUE(pages1[0] == rows[0]) << "O differs from the contiguous cache's";
  EXPECT_TRUE(pages1[1] == rows[1]) << "LSE differs from the contiguous cache's";

  // And against the float64 reference, each sequence alone over its cached + Sq keys.
  decoding::testing::expect_each_sequence_matches(
      p, c.cached, q, k_pool_after, v_pool_after,
      [&](int b, int h, int t) { return pool_row(table[b * pages_per_seq + t / P], h, t % P); }, pages1[0], pages1[1],
      opt);
}
INSTANTIATE_TEST_SUITE_P(Steps, Paged, ::testing::ValuesIn(paged_cases()),
                         [](const ::testing::TestParamInfo<PagedCase>& i) { return i.param.name; });

// Refused before any device work, naming what is wrong.
TEST(PagedRefused, BadTables) {
  fa::Problem p;
  p.batch = 2, p.heads = 4, p.kv_heads = 2, p.seqlen_q = 1, p.head_dim = 64, p.dtype = fa::Dtype::bf16;
  alignas(16) static float storage[8];
  float* dummy = storage + 1;  // 4 bytes past a 16-byte boundary: refused at the latest by the alignment check
  auto message = [&](int page_size, int num_pages, int pages_per_seq, std::vector<int> table, std::vector<int> lens) {
    const decoding::steps::PagedKVCache cache{dummy, dummy, num_pages, page_size, pages_per_seq, table, lens};
    try {
      decoding::steps::forward_with_paged_cache(p, dummy, dummy, dummy, cache, dummy, dummy, {}, nullptr);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(48, 4, 2, {0, 1, 2, 3}, {0, 0}).find("page_size must be"), std::string::npos);
  EXPECT_NE(message(16, 4, 2, {0, 1, 2}, {0, 0}).find("batch x pages_per_seq = 4"), std::string::npos);
  EXPECT_NE(message(16, 4, 2, {0, 1, 2, 3}, {0}).find("one length per sequence"), std::string::npos);
  // 32 cached + 1 new = 33 tokens: 3 pages of 16, the row holds 2.
  EXPECT_NE(message(16, 4, 2, {0, 1, 2, 3}, {32, 0}).find("sequence 0 needs 3 pages"), std::string::npos);
  EXPECT_NE(message(16, 4, 2, {0, 1, 7, -1}, {16, 0}).find("physical page 7 is outside the pool of 4"), std::string::npos);
  EXPECT_NE(message(16, 4, 2, {0, -1, 0, -1}, {0, 0}).find("used by sequence 0 (page 0) and by sequence 1 (page 0)"),
            std::string::npos);
  EXPECT_NE(message(16, 4, 2, {0, -1, 1, -1}, {-2, 0}).find("negative"), std::string::npos);
  // Entries a sequence does not use are not read: -1 and repeats past a sequence's pages are fine
  // (this one passes the table and is refused at the alignment check).
  EXPECT_NE(message(16, 4, 2, {0, -1, 1, 1}, {0, 0}).find("16-byte aligned"), std::string::npos);
}

}  // namespace
