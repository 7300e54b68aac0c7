// The stream-K schedule (stream_k.h) on the CPU: even shares, every (tile, key tile) unit in one
// segment, the fix-up's view of a tile's pieces (numbered in key order) agreeing with the CTAs'
// walks, and the pieces' partial results merging (combine_row) into the float64 reference.
// ctest -L 10_decoding
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "10_decoding/split_plan.h"
#include "10_decoding/stream_k.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace {

using decoding::Segment;
using decoding::StreamK;

// Every segment of every CTA, by walking the shares as a kernel would.
std::vector<std::vector<Segment>> walk(const StreamK& s) {
  std::vector<std::vector<Segment>> out(s.ctas);
  for (int c = 0; c < s.ctas; ++c)
    for (std::int64_t u = s.begin(c); u < s.end(c);) {
      const Segment seg = decoding::segment_at(s, c, u);
      out[c].push_back(seg);
      u = seg.tile * s.key_blocks + seg.kb_end;
    }
  return out;
}

TEST(StreamK, ByHand) {
  // Batch 1, 8 KV heads, 16k keys (256 key tiles) on 132 SMs: 2048 units, 15 each and one more for
  // the first 2048 - 132 x 15 = 68 CTAs. Tile 0 is CTAs 0-15 (16 units each), all partial.
  const StreamK s{8, 256, 132};
  EXPECT_EQ(s.begin(68), 68 * 16);
  EXPECT_EQ(s.end(68) - s.begin(68), 15);
  EXPECT_EQ(decoding::first_cta(s, 0), 0);
  EXPECT_EQ(decoding::last_cta(s, 0), 15);
  // Tile 4 (units 1024-1279): CTAs 64-67 take 16 units each (to 1088), CTAs 68-79 15 each (to
  // 1268), and CTA 80 (units 1268-1282) crosses into tile 5: 17 pieces, the last one (piece 16)
  // CTA 80's first segment; its second segment is tile 5's first piece (piece 0).
  EXPECT_EQ(decoding::first_cta(s, 4), 64);
  EXPECT_EQ(decoding::last_cta(s, 4), 80);
  EXPECT_EQ(decoding::piece_of(s, 4, 80), 16);
  EXPECT_EQ(decoding::piece_of(s, 5, 80), 0);
  const std::vector<Segment> cta80 = walk(s)[80];
  ASSERT_EQ(cta80.size(), 2u);
  EXPECT_EQ(cta80[0].tile, 4);
  EXPECT_EQ(cta80[0].kb_begin, 1268 - 1024);
  EXPECT_EQ(cta80[0].kb_end, 256);
  EXPECT_EQ(cta80[1].tile, 5);
  EXPECT_EQ(cta80[1].kb_begin, 0);
  EXPECT_EQ(cta80[1].kb_end, 1283 - 1280);
  // Batch 64 with one KV head and 300 keys (5 key tiles): 320 units, 2 or 3 a CTA, so most tiles
  // are cut in two; none is whole.
  const StreamK b64{64, 5, 132};
  EXPECT_EQ(b64.end(0) - b64.begin(0), 3);
  EXPECT_EQ(b64.end(131) - b64.begin(131), 2);
  // Few units: 3 units on 8 CTAs; CTAs 3-7 get nothing.
  const StreamK few{1, 3, 8};
  EXPECT_EQ(few.end(2), 3);
  EXPECT_EQ(few.begin(7), few.end(7));
  EXPECT_EQ(decoding::last_cta(few, 0), 2);
}

// Over many shapes: the shares are even, the walks cover every unit once, and each tile's pieces
// as the fix-up sees them (first_cta .. last_cta, piece_of) are exactly the walk's segments of
// that tile, in key order.
TEST(StreamK, CoversEveryUnitOnceAndTheFixUpFindsThePieces) {
  for (std::int64_t tiles : {1, 2, 7, 8, 64, 100, 133, 1000})
    for (int key_blocks : {1, 2, 5, 64, 256, 1023})
      for (int ctas : {1, 7, 132, 264}) {
        const StreamK s{tiles, key_blocks, ctas};
        SCOPED_TRACE(testing::Message() << tiles << " tiles, " << key_blocks << " key tiles, " << ctas << " CTAs");
        const std::int64_t base = s.units() / ctas;
        for (int c = 0; c < ctas; ++c) {
          const std::int64_t n = s.end(c) - s.begin(c);
          ASSERT_TRUE(n == base || n == base + 1);
        }
        ASSERT_EQ(s.begin(0), 0);
        ASSERT_EQ(s.end(ctas - 1), s.units());
        const std::vector<std::vector<Segment>> segs = walk(s);
        std::vector<char> seen(s.units(), 0);
        std::map<std::int64_t, std::vector<std::pair<int, Segment>>> by_tile;  // tile -> (cta, segment)
        for (int c = 0; c < ctas; ++c)
          for (const Segment& g : segs[c]) {
            ASSERT_LT(g.kb_begin, g.kb_end);
            ASSERT_EQ(g.whole, g.kb_begin == 0 && g.kb_end == key_blocks);
            for (int kb = g.kb_begin; kb < g.kb_end; ++kb) {
              const std::int64_t u = g.tile * key_blocks + kb;
              ASSERT_EQ(seen[u], 0) << "unit " << u << " twice";
              seen[u] = 1;
              ASSERT_EQ(s.owner(u), c);
            }
            by_tile[g.tile].push_back({c, g});
          }
        ASSERT_EQ(std::count(seen.begin(), seen.end(), 1), s.units());
        // The kernel's workspace (steps/stream_k.cuh): piece_of numbers a tile's pieces 0, 1, ...
        // in key order, and max_pieces is the most any tile has.
        std::size_t most = 0;
        for (const auto& [tile, pieces] : by_tile) {
          most = std::max(most, pieces.size());
          for (std::size_t k = 0; k < pieces.size(); ++k)
            ASSERT_EQ(decoding::piece_of(s, tile, pieces[k].first), static_cast<int>(k));
        }
        ASSERT_EQ(decoding::max_pieces(s), static_cast<int>(most));
        for (const auto& [tile, pieces] : by_tile) {
          ASSERT_EQ(decoding::first_cta(s, tile), pieces.front().first);
          ASSERT_EQ(decoding::last_cta(s, tile), pieces.back().first);
          ASSERT_EQ(static_cast<std::size_t>(decoding::last_cta(s, tile) - decoding::first_cta(s, tile) + 1), pieces.size());
          int next_kb = 0;
          for (const auto& piece : pieces) {  // in CTA order, which is key order
            ASSERT_EQ(piece.second.kb_begin, next_kb);
            next_kb = piece.second.kb_end;
          }
          ASSERT_EQ(next_kb, key_blocks);
          ASSERT_EQ(pieces.size() == 1, pieces.front().second.whole);
        }
      }
}

// The math the kernel will do, in float64: every tile's pieces, each the softmax of its own key
// tiles, merged by combine_row, give the reference of the whole key range. One (batch, KV head) per
// tile, Bc = 16 keys per key tile, Sk not a multiple of 16, causal so that some pieces of some rows
// see no key.
TEST(Combine, StreamKPiecesMergeIntoTheReference) {  // graded with combine_row (todos.tsv)
  fa::Problem p;
  p.batch = 3, p.heads = 8, p.kv_heads = 2, p.seqlen_q = 40, p.seqlen_k = 150, p.head_dim = 16;
  p.causal = true;
  constexpr int kBc = 16;
  const int key_blocks = (p.seqlen_k + kBc - 1) / kBc;  // 10
  const fa::HostInputs in = fa::make_inputs(p, 31);
  const fa::ReferenceForward whole = fa::reference_forward(p, in.q, in.k, in.v);
  const StreamK s{std::int64_t{p.batch} * p.kv_heads, key_blocks, 7};  // 60 units, 8 or 9 a CTA
  const std::vector<std::vector<Segment>> segs = walk(s);
  // Every segment's reference alone, indexed by (tile, kb_begin).
  std::map<std::pair<std::int64_t, int>, fa::ReferenceForward> part;
  for (const auto& cta : segs)
    for (const Segment& g : cta) {
      const int lo = g.kb_begin * kBc, hi = std::min(p.seqlen_k, g.kb_end * kBc);
      part[{g.tile, g.kb_begin}] =
          fa::reference_forward(p, in.q, in.k, in.v, [=](int, int, int, int j) { return j >= lo && j < hi; });
    }
  const int D = p.head_dim, G = p.group_size();
  double worst = 0;
  for (std::int64_t tile = 0; tile < s.tiles; ++tile) {
    const int b = static_cast<int>(tile / p.kv_heads), kvh = static_cast<int>(tile % p.kv_heads);
    std::vector<const fa::ReferenceForward*> pieces;
    for (const auto& [key, ref] : part)
      if (key.first == tile) pieces.push_back(&ref);  // std::map: in key order
    for (int h = kvh * G; h < (kvh + 1) * G; ++h)
      for (int i = 0; i < p.seqlen_q; ++i) {
        const std::size_t row = (static_cast<std::size_t>(b) * p.heads + h) * p.seqlen_q + i;
        std::vector<double> o_parts, lse_parts, o;
        for (const fa::ReferenceForward* r : pieces) {
          lse_parts.push_back(r->lse[row]);
          o_parts.insert(o_parts.end(), r->o.begin() + row * D, r->o.begin() + (row + 1) * D);
        }
        double lse = 0;
        decoding::combine_row(o_parts, lse_parts, D, -std::numeric_limits<double>::infinity(), o, lse);
        if (std::isinf(whole.lse[row])) {
          EXPECT_EQ(lse, whole.lse[row]);
        } else {
          worst = std::max(worst, std::abs(lse - whole.lse[row]));
        }
        for (int c = 0; c < D; ++c) worst = std::max(worst, std::abs(o[c] - whole.o[row * D + c]));
      }
  }
  EXPECT_LT(worst, 1e-12);
}

}  // namespace
