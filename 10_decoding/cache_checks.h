// The GPU tests' shared check of a cache step (test_cache_options.cpp's contiguous cache,
// test_paged_cache.cpp's pages): each sequence on its own against the float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/host/forward_check.h"

namespace decoding::testing {

// Sequence b of p (batch B, Sq new tokens after cached[b]) as a problem of batch 1 over its
// cached[b] + Sq keys, against the reference with `opt`: key t of KV head h is the D floats at
// k[key_row(b, h, t)] and v[key_row(b, h, t)]; o and lse are the step's downloaded outputs.
template <class KeyRow>
void expect_each_sequence_matches(const fa::Problem& p, const std::vector<int>& cached, const std::vector<float>& q,
                                  const std::vector<float>& k, const std::vector<float>& v, KeyRow key_row,
                                  const std::vector<std::uint8_t>& o, const std::vector<std::uint8_t>& lse,
                                  const fa::ScoreOptions& opt) {
  const std::size_t elem = fa::dtype_size(p.dtype), D = p.head_dim;
  const std::size_t q_per_b = static_cast<std::size_t>(p.heads) * p.seqlen_q * D;
  const std::size_t lse_per_b = static_cast<std::size_t>(p.heads) * p.seqlen_q;
  for (int b = 0; b < p.batch; ++b) {
    fa::Problem pb = p;
    pb.batch = 1;
    pb.seqlen_k = cached[b] + p.seqlen_q;
    fa::HostInputs in;
    in.q.assign(q.begin() + b * q_per_b, q.begin() + (b + 1) * q_per_b);
    for (int h = 0; h < p.kv_heads; ++h)
      for (int t = 0; t < pb.seqlen_k; ++t) {
        const std::int64_t at = key_row(b, h, t);
        in.k.insert(in.k.end(), k.begin() + at, k.begin() + at + D);
        in.v.insert(in.v.end(), v.begin() + at, v.begin() + at + D);
      }
    const std::vector<std::uint8_t> o_b(o.begin() + b * q_per_b * elem, o.begin() + (b + 1) * q_per_b * elem);
    const std::vector<std::uint8_t> lse_b(lse.begin() + b * lse_per_b * sizeof(float),
                                          lse.begin() + (b + 1) * lse_per_b * sizeof(float));
    const fa::ForwardCheck check = fa::check_forward(pb, in, o_b, lse_b, opt);
    EXPECT_TRUE(check.pass()) << "sequence " << b << ": " << pb.describe() << " (" << cached[b] << " cached)\n"
                              << check.summary();
  }
}

}  // namespace decoding::testing
