// Chapter 10's score options (logit softcap, ALiBi, attention sinks) and its KV cache, against the
// float64 reference with the same options (common/host/reference.h) by the shared rule
// (common/host/forward_check.h): the element tolerance and the same-precision rule.
// ctest -L 10_decoding
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "10_decoding/cache_checks.h"
#include "10_decoding/decoding.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"
#include "common/harness/test_cases.h"

namespace {

using fa::testing::download_guarded;
using fa::testing::kGuardBytes;

struct Shape {
  int batch, heads, kv_heads, seqlen_q, seqlen_k;
  bool causal;
};

enum class Opts { softcap, alibi, sinks, all };
const char* opts_name(Opts o) {
  switch (o) {
    case Opts::softcap: return "softcap";
    case Opts::alibi: return "alibi";
    case Opts::sinks: return "sinks";
    default: return "all";
  }
}

// Softcap 2: standard-normal scores reach it, so tanh bends them. ALiBi: the paper's geometric
// slopes 2^(-8 (h + 1) / H). Sinks: logits of size ~2, some above the scores, some below.
fa::ScoreOptions make_options(Opts which, int heads, std::uint64_t seed) {
  fa::ScoreOptions o;
  if (which == Opts::softcap || which == Opts::all) o.softcap = 2.0;
  if (which == Opts::alibi || which == Opts::all)
    for (int h = 0; h < heads; ++h) o.alibi_slopes.push_back(std::exp2(-8.0f * (h + 1) / heads));
  if (which == Opts::sinks || which == Opts::all)
    for (int h = 0; h < heads; ++h) o.sink_logits.push_back(2.0f * fa::seeded_normal(seed, h));
  return o;
}

struct OptionsCase {
  fa::Problem problem;
  Opts opts;
  std::string name;
};
void PrintTo(const OptionsCase& c, std::ostream* os) { *os << c.name; }

std::vector<OptionsCase> options_cases() {
  // Split (batch 1, long) and not (batch 64), several positions (Sq 5, 16), causal rows that see no
  // key (Sq 16 > Sk 9: the sink alone).
  const std::vector<Shape> shapes = {{1, 32, 8, 1, 4097, false}, {64, 8, 1, 1, 300, true}, {3, 8, 8, 5, 70, true},
                                     {4, 32, 4, 16, 2049, true}, {2, 16, 2, 16, 9, true}};
  std::vector<OptionsCase> cases;
  for (const Shape& s : shapes)
    for (Opts o : {Opts::softcap, Opts::alibi, Opts::sinks, Opts::all})
      for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
        for (int d : {64, 128}) {
          fa::Problem p;
          p.batch = s.batch, p.heads = s.heads, p.kv_heads = s.kv_heads, p.seqlen_q = s.seqlen_q, p.seqlen_k = s.seqlen_k;
          p.head_dim = d, p.causal = s.causal, p.dtype = dtype;
          cases.push_back({p, o,
                           "B" + std::to_string(s.batch) + "_H" + std::to_string(s.heads) + "x" + std::to_string(s.kv_heads) +
                               "_Sq" + std::to_string(s.seqlen_q) + "_Sk" + std::to_string(s.seqlen_k) + "_D" +
                               std::to_string(d) + (s.causal ? "_causal_" : "_") + opts_name(o) + "_" +
                               fa::dtype_name(dtype)});
        }
  return cases;
}

class Options : public ::testing::TestWithParam<OptionsCase> {};

TEST_P(Options, MatchReference) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const OptionsCase& c = GetParam();
  const fa::Problem& p = c.problem;
  const fa::HostInputs in = fa::make_inputs(p, fa::testing::seed_of(c.name));
  const fa::ScoreOptions opt = make_options(c.opts, p.heads, fa::testing::seed_of(c.name) + 1);
  const std::size_t elem = fa::dtype_size(p.dtype);
  fa::cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem);
  fa::cuda::DeviceBuffer o(p.o_elems() * elem + kGuardBytes), lse(p.lse_elems() * sizeof(float) + kGuardBytes);
  q.upload(fa::encode(in.q, p.dtype));
  k.upload(fa::encode(in.k, p.dtype));
  v.upload(fa::encode(in.v, p.dtype));
  const fa::cuda::Stream stream;
  std::vector<std::uint8_t> runs[2][2];  // [run][O, LSE]
  for (auto& run : runs) {
    o.poison(stream.get());
    lse.poison(stream.get());
    decoding::forward_with_options(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), opt, stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    run[0] = download_guarded(o, "O");
    run[1] = download_guarded(lse, "LSE");
  }
  const fa::ForwardCheck check = fa::check_forward(p, in, runs[0][0], runs[0][1], opt);
  EXPECT_TRUE(check.pass()) << p.describe() << " with " << opts_name(c.opts) << " (" << decoding::plan(p).splits
                            << " pieces)\n"
                            << check.summary();
  EXPECT_TRUE(runs[0][0] == runs[1][0]) << "O differs between two identical calls";
  EXPECT_TRUE(runs[0][1] == runs[1][1]) << "LSE differs between two identical calls";
}
INSTANTIATE_TEST_SUITE_P(Decode, Options, ::testing::ValuesIn(options_cases()),
                         [](const ::testing::TestParamInfo<OptionsCase>& i) { return i.param.name; });

TEST(OptionsRefused, BadOptions) {
  fa::Problem p;
  p.heads = 4, p.kv_heads = 2, p.head_dim = 64, p.dtype = fa::Dtype::bf16;
  static float dummy[4];
  fa::ScoreOptions bad;
  bad.alibi_slopes = {1.0f, 2.0f};  // two slopes for four heads
  EXPECT_THROW(decoding::forward_with_options(p, dummy, dummy, dummy, dummy, dummy, bad, nullptr), std::invalid_argument);
  bad = {};
  bad.softcap = -1.0;
  EXPECT_THROW(decoding::forward_with_options(p, dummy, dummy, dummy, dummy, dummy, bad, nullptr), std::invalid_argument);
  bad = {};
  bad.sink_logits = {0.0f, 1.0f, NAN, 0.0f};
  EXPECT_THROW(decoding::forward_with_options(p, dummy, dummy, dummy, dummy, dummy, bad, nullptr), std::invalid_argument);
}

// ---------------------------------------------------------------- the KV cache

struct CacheCase {
  int heads, kv_heads, seqlen_q, capacity;
  std::vector<int> cached;  // per sequence, before the step
  bool causal;
  bool options;
  int head_dim;
  fa::Dtype dtype;
  std::string name;
};
void PrintTo(const CacheCase& c, std::ostream* os) { *os << c.name; }

std::vector<CacheCase> cache_cases() {
  struct Base {
    int heads, kv_heads, seqlen_q, capacity;
    std::vector<int> cached;
    bool causal;
    const char* name;
  };
  // Ragged batches: an empty cache, a full one after the step (cached = capacity - Sq), lengths
  // that are not multiples of the key tile, one long sequence among short ones (pieces of the
  // short ones see no key), speculative steps of 4 and 16 tokens under causal masking.
  const std::vector<Base> bases = {{8, 2, 1, 300, {0, 17, 299}, false, "ragged3_Sq1"},
                                   {32, 8, 4, 5000, {4096, 1000}, true, "Sq4_causal"},
                                   {16, 16, 16, 2100, {0, 64, 2000, 2084}, true, "Sq16_causal"},
                                   {32, 8, 1, 70000, {65536, 3}, false, "long_and_short"}};
  std::vector<CacheCase> cases;
  const bool full = fa::testing::test_tier() == fa::testing::Tier::full;
  for (const Base& b : bases)
    for (bool options : {false, true})
      for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
        for (int d : {64, 128}) {
          // core: the 70,000-key cache (seconds of reference work per case) at two of the eight
          // (options, dtype, D); the other bases run all eight.
          const bool long_cache = std::string(b.name) == "long_and_short";
          if (!full && long_cache && !(options && dtype == fa::Dtype::bf16 && d == 128) &&
              !(!options && dtype == fa::Dtype::f16 && d == 64))
            continue;
          cases.push_back({b.heads, b.kv_heads, b.seqlen_q, b.capacity, b.cached, b.causal, options, d, dtype,
                           std::string(b.name) + "_D" + std::to_string(d) + (options ? "_options_" : "_") +
                               fa::dtype_name(dtype)});
        }
  return cases;
}

class Cache : public ::testing::TestWithParam<CacheCase> {};

// One step: the cache holds random tokens (and a different random pattern past them); after the
// call its rows [0, cached) are unchanged, rows [cached, cached + Sq) are k_new / v_new, the rest
// unchanged; each sequence's O and LSE match the reference of that sequence alone over its
// cached + Sq keys. Twice, with the same bits (the second append rewrites the same rows).
TEST_P(Cache, AppendsAndAttends) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const CacheCase& c = GetParam();
  const int B = static_cast<int>(c.cached.size()), D = c.head_dim;
  fa::Problem p;  // q's problem; seqlen_k is not used by forward_with_cache
  p.batch = B, p.heads = c.heads, p.kv_heads = c.kv_heads, p.seqlen_q = c.seqlen_q, p.seqlen_k = 1;
  p.head_dim = D, p.causal = c.causal, p.dtype = c.dtype;
  const std::uint64_t seed = fa::testing::seed_of(c.name);
  const std::size_t elem = fa::dtype_size(p.dtype);
  const std::int64_t cache_elems = std::int64_t{B} * c.kv_heads * c.capacity * D;
  const std::int64_t new_elems = std::int64_t{B} * c.kv_heads * c.seqlen_q * D;
  const std::vector<float> q = fa::random_normal(p.q_elems(), seed, p.dtype);
  const std::vector<float> k_cache0 = fa::random_normal(cache_elems, seed + 1, p.dtype);
  const std::vector<float> v_cache0 = fa::random_normal(cache_elems, seed + 2, p.dtype);
  const std::vector<float> k_new = fa::random_normal(new_elems, seed + 3, p.dtype);
  const std::vector<float> v_new = fa::random_normal(new_elems, seed + 4, p.dtype);
  const fa::ScoreOptions opt = c.options ? make_options(Opts::all, c.heads, seed + 5) : fa::ScoreOptions{};

  // What the cache must hold after the step.
  std::vector<float> k_after = k_cache0, v_after = v_cache0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < c.kv_heads; ++h)
      for (int i = 0; i < c.seqlen_q; ++i) {
        const std::int64_t src = ((std::int64_t{b} * c.kv_heads + h) * c.seqlen_q + i) * D;
        const std::int64_t dst = ((std::int64_t{b} * c.kv_heads + h) * c.capacity + c.cached[b] + i) * D;
        std::copy_n(&k_new[src], D, &k_after[dst]);
        std::copy_n(&v_new[src], D, &v_after[dst]);
      }

  fa::cuda::DeviceBuffer q_d(p.q_elems() * elem), kc(cache_elems * elem), vc(cache_elems * elem);
  fa::cuda::DeviceBuffer kn(new_elems * elem), vn(new_elems * elem);
  fa::cuda::DeviceBuffer o(p.o_elems() * elem + kGuardBytes), lse(p.lse_elems() * sizeof(float) + kGuardBytes);
  q_d.upload(fa::encode(q, p.dtype));
  kc.upload(fa::encode(k_cache0, p.dtype));
  vc.upload(fa::encode(v_cache0, p.dtype));
  kn.upload(fa::encode(k_new, p.dtype));
  vn.upload(fa::encode(v_new, p.dtype));
  const decoding::KVCache cache{kc.get(), vc.get(), c.capacity, c.cached};
  const fa::cuda::Stream stream;
  std::vector<std::uint8_t> runs[2][2];
  for (auto& run : runs) {
    o.poison(stream.get());
    lse.poison(stream.get());
    decoding::forward_with_cache(p, q_d.get(), kn.get(), vn.get(), cache, o.get(), lse.as<float>(), opt, stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    run[0] = download_guarded(o, "O");
    run[1] = download_guarded(lse, "LSE");
  }
  EXPECT_TRUE(runs[0][0] == runs[1][0]) << "O differs between two identical calls";
  EXPECT_TRUE(runs[0][1] == runs[1][1]) << "LSE differs between two identical calls";
  EXPECT_TRUE(kc.download() == fa::encode(k_after, p.dtype)) << "K cache: not exactly the old tokens + k_new";
  EXPECT_TRUE(vc.download() == fa::encode(v_after, p.dtype)) << "V cache: not exactly the old tokens + v_new";

  // Each sequence on its own: batch 1, its cached + Sq keys.
  decoding::testing::expect_each_sequence_matches(
      p, c.cached, q, k_after, v_after,
      [&](int b, int h, int t) { return ((std::int64_t{b} * c.kv_heads + h) * c.capacity + t) * D; }, runs[0][0],
      runs[0][1], opt);
}
INSTANTIATE_TEST_SUITE_P(Steps, Cache, ::testing::ValuesIn(cache_cases()),
                         [](const ::testing::TestParamInfo<CacheCase>& i) { return i.param.name; });

// Refused before any device work, naming what is wrong.
TEST(CacheRefused, BadLengths) {
  fa::Problem p;
  p.batch = 2, p.heads = 4, p.kv_heads = 2, p.seqlen_q = 4, p.head_dim = 64, p.dtype = fa::Dtype::bf16;
  static float dummy[4];
  auto message = [&](const decoding::KVCache& cache) {
    try {
      decoding::forward_with_cache(p, dummy, dummy, dummy, cache, dummy, dummy, {}, nullptr);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({dummy, dummy, 100, {3}}).find("one length per sequence"), std::string::npos);
  EXPECT_NE(message({dummy, dummy, 100, {3, 97}}).find("capacity - seqlen_q = 96"), std::string::npos);
  EXPECT_NE(message({dummy, dummy, 100, {-1, 0}}).find("sequence 0"), std::string::npos);
  EXPECT_NE(message({dummy, dummy, 0, {0, 0}}).find("capacity"), std::string::npos);
}

}  // namespace
