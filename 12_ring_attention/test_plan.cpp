// Chapter 12's plan against brute force (no GPU): the zig-zag split covers the sequence once, the
// ring's schedule attends every visible (query, key) pair exactly once and no other, causal work
// is balanced over the ranks, and the refusals and the configuration say what they should.
//   ctest -L 12_ring_attention   (the entry 12_ring_attention.cpu)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "12_ring_attention/plan.h"

namespace ring_attention {
namespace {

TEST(Split, ChunksCoverTheSequenceOnceAndEachRankHoldsTwo) {
  for (int ranks = 1; ranks <= kMaxRanks; ++ranks) {
    const int seqlen = 2 * ranks * kChunkMultiple * 3;
    const std::vector<int> b = chunk_bounds(seqlen, ranks);
    ASSERT_EQ(b.size(), 2u * ranks + 1);
    EXPECT_EQ(b.front(), 0);
    EXPECT_EQ(b.back(), seqlen);
    for (int c = 0; c < 2 * ranks; ++c) EXPECT_EQ(b[c + 1] - b[c], seqlen / (2 * ranks)) << "chunk " << c;
    std::vector<int> owners(2 * ranks, 0);
    for (int r = 0; r < ranks; ++r) {
      const RankChunks mine = rank_chunks(r, ranks);
      EXPECT_LT(mine.first, mine.second);
      ++owners[mine.first], ++owners[mine.second];
    }
    for (int c = 0; c < 2 * ranks; ++c) EXPECT_EQ(owners[c], 1) << "chunk " << c << " of " << 2 * ranks;
  }
}

TEST(Split, PairsFollowTheChunkOrder) {
  EXPECT_EQ(classify(3, 1, true), Pair::full);
  EXPECT_EQ(classify(3, 3, true), Pair::causal);
  EXPECT_EQ(classify(1, 3, true), Pair::skipped);
  for (int q = 0; q < 4; ++q)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(classify(q, k, false), Pair::full);
}

TEST(Schedule, EveryRankHoldsEveryBlockOnceAndBlocksMoveToTheNextRank) {
  for (int ranks = 1; ranks <= kMaxRanks; ++ranks)
    for (int step = 0; step < ranks; ++step) {
      std::vector<int> held(ranks, 0);
      for (int r = 0; r < ranks; ++r) {
        ++held[block_owner(r, step, ranks)];
        if (step + 1 < ranks)  // what rank r holds now, rank r + 1 holds next step
          EXPECT_EQ(block_owner((r + 1) % ranks, step + 1, ranks), block_owner(r, step, ranks));
        std::vector<int> seen(ranks, 0);
        for (int s = 0; s < ranks; ++s) ++seen[block_owner(r, s, ranks)];
        for (int o = 0; o < ranks; ++o) EXPECT_EQ(seen[o], 1) << "rank " << r << " block " << o;
      }
      for (int o = 0; o < ranks; ++o) EXPECT_EQ(held[o], 1) << "step " << step << " block " << o;
    }
}

// Brute force over tokens: every task attends its query chunk's rows to its key chunk's keys,
// all of them (full) or those at or before the row (causal: the same tokens); across all ranks'
// schedules each (i, j) must be attended once where it is visible, never where it is not.
TEST(Schedule, EveryVisibleQueryKeyPairIsAttendedExactlyOnce) {
  for (int ranks = 1; ranks <= kMaxRanks; ++ranks)
    for (bool causal : {false, true}) {
      const int seqlen = 2 * ranks * 3;  // chunks of 3 tokens: enough for a triangle
      const std::vector<int> b = chunk_bounds(seqlen, ranks);
      std::vector<int> count(seqlen * seqlen, 0);
      for (int r = 0; r < ranks; ++r)
        for (const Task& t : rank_schedule(r, ranks, causal)) {
          ASSERT_NE(t.pair, Pair::skipped);
          EXPECT_EQ(t.q_chunk, rank_chunks(r, ranks)[t.q_slot]);
          EXPECT_EQ(t.k_chunk, rank_chunks(block_owner(r, t.step, ranks), ranks)[t.k_slot]);
          for (int i = b[t.q_chunk]; i < b[t.q_chunk + 1]; ++i)
            for (int j = b[t.k_chunk]; j < b[t.k_chunk + 1]; ++j)
              if (t.pair == Pair::full || j - b[t.k_chunk] <= i - b[t.q_chunk]) ++count[i * seqlen + j];
        }
      for (int i = 0; i < seqlen; ++i)
        for (int j = 0; j < seqlen; ++j)
          ASSERT_EQ(count[i * seqlen + j], (!causal || j <= i) ? 1 : 0)
              << "query " << i << " key " << j << " ranks " << ranks << (causal ? " causal" : " full");
    }
}

// Causal work per rank, in (query, key) pairs: the zig-zag split gives every rank the same,
// 2R + 1 chunks' worth of keys for its two query chunks; a contiguous split would give rank 0 one
// triangle and rank R - 1 almost all of its queries' keys.
TEST(Schedule, CausalWorkIsTheSameOnEveryRank) {
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    const int chunk = 16;
    std::vector<long> work(ranks, 0);
    for (int r = 0; r < ranks; ++r)
      for (const Task& t : rank_schedule(r, ranks, true))
        work[r] += t.pair == Pair::full ? long{chunk} * chunk : long{chunk} * (chunk + 1) / 2;
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(work[r], work[0]) << "rank " << r << " of " << ranks;
    // Per rank: two diagonal triangles and 2R - 1 full squares (keys of 2R + 1 chunks in all).
    EXPECT_EQ(work[0], 2L * chunk * (chunk + 1) / 2 + (2L * ranks - 1) * chunk * chunk);
  }
}

TEST(Schedule, StepsRunInOrderAndEachStepHasAtMostFourPairs) {
  for (int ranks = 1; ranks <= kMaxRanks; ++ranks)
    for (int r = 0; r < ranks; ++r) {
      const std::vector<Task> tasks = rank_schedule(r, ranks, true);
      EXPECT_TRUE(std::is_sorted(tasks.begin(), tasks.end(),
                                 [](const Task& a, const Task& b) { return a.step < b.step; }));
      for (int s = 0; s < ranks; ++s) {
        const auto n = std::count_if(tasks.begin(), tasks.end(), [s](const Task& t) { return t.step == s; });
        EXPECT_GE(n, 1);  // zig-zag: a rank's later chunk sees every block's earlier chunk
        EXPECT_LE(n, 4);
      }
    }
}

// The Ring's buffers, replayed on owners' ids: each rank attends the block the schedule names, a
// block is never received into the buffer being attended or into the rank's own, and every
// block's dK/dV sums collect each rank's pairs against it once and end at the block's own rank.
TEST(Schedule, BuffersHoldTheScheduledBlocksAndTheSumsComeHome) {
  for (int ranks = 1; ranks <= kMaxRanks; ++ranks)
    for (bool causal : {false, true}) {
      std::vector<std::array<int, 3>> kv(ranks, {-1, -1, -1});   // [rank][buffer] = owner
      std::vector<std::array<std::vector<int>, 2>> sums(ranks);  // [rank][buffer] = (owner, q rank, task) ids
      std::vector<std::array<int, 2>> sums_of(ranks, {-1, -1});  // [rank][buffer] = whose block's sums
      for (int r = 0; r < ranks; ++r) kv[r][0] = r, sums_of[r][grad_buffer(0)] = r;
      std::vector<std::vector<Task>> tasks;
      for (int r = 0; r < ranks; ++r) tasks.push_back(rank_schedule(r, ranks, causal));
      for (int s = 0; s < ranks; ++s) {
        for (int r = 0; r < ranks; ++r) {
          ASSERT_EQ(kv[r][kv_buffer(s)], block_owner(r, s, ranks)) << "rank " << r << " step " << s;
          ASSERT_EQ(sums_of[r][grad_buffer(s)], block_owner(r, s, ranks)) << "rank " << r << " step " << s;
          if (s + 1 < ranks) {
            EXPECT_NE(kv_buffer(s + 1), kv_buffer(s));  // the buffer being attended
            EXPECT_NE(kv_buffer(s + 1), 0);             // the rank's own block
          }
          EXPECT_NE(grad_buffer(s + 1), grad_buffer(s));
          for (std::size_t i = 0; i < tasks[r].size(); ++i)
            if (tasks[r][i].step == s) sums[r][grad_buffer(s)].push_back(block_owner(r, s, ranks) * 1000 + r * 100 + int(i));
        }
        if (ranks == 1) continue;  // the block never leaves
        auto kv_next = kv;
        auto sums_next = sums;
        auto of_next = sums_of;
        for (int r = 0; r < ranks; ++r) {  // every rank receives from rank r - 1 at once
          const int prev = (r + ranks - 1) % ranks;
          if (s + 1 < ranks) kv_next[r][kv_buffer(s + 1)] = kv[prev][kv_buffer(s)];
          sums_next[r][grad_buffer(s + 1)] = sums[prev][grad_buffer(s)];
          of_next[r][grad_buffer(s + 1)] = sums_of[prev][grad_buffer(s)];
        }
        kv = kv_next, sums = sums_next, sums_of = of_next;
      }
      for (int owner = 0; owner < ranks; ++owner) {
        std::vector<int> want;
        for (int r = 0; r < ranks; ++r)
          for (std::size_t i = 0; i < tasks[r].size(); ++i)
            if (block_owner(r, tasks[r][i].step, ranks) == owner) want.push_back(owner * 1000 + r * 100 + int(i));
        std::vector<int> got = sums[owner][grads_home_buffer(ranks)];
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        EXPECT_EQ(sums_of[owner][grads_home_buffer(ranks)], owner);
        EXPECT_EQ(got, want) << "block " << owner << " of " << ranks << (causal ? " causal" : " full");
      }
    }
}

TEST(Problem, PairsAreChunkSizedAndCausalOnlyOnTheDiagonal) {
  fa::Problem p = fa::default_problem(fa::Dtype::bf16);
  p.seqlen_q = p.seqlen_k = 4096, p.causal = true, p.heads = 8, p.kv_heads = 2;
  const fa::Problem full = pair_problem(p, 4, Pair::full), diag = pair_problem(p, 4, Pair::causal);
  EXPECT_EQ(full.seqlen_q, 512);
  EXPECT_EQ(full.seqlen_k, 512);
  EXPECT_FALSE(full.causal);
  EXPECT_TRUE(diag.causal);
  EXPECT_EQ(diag.kv_heads, 2);
  EXPECT_FLOAT_EQ(diag.scale(), p.scale());  // 1 / sqrt(D), not of the chunk
}

TEST(Problem, RefusesWhatTheRingCannotSplit) {
  fa::Problem p = fa::default_problem(fa::Dtype::bf16);
  p.seqlen_q = p.seqlen_k = 1024;
  EXPECT_EQ(ring_problem_error(p, 4), "");
  EXPECT_NE(ring_problem_error(p, 8).find("multiple of 2R * 128 = 2048"), std::string::npos);
  p.seqlen_q = p.seqlen_k = 1000;
  EXPECT_NE(ring_problem_error(p, 1).find("multiple of 2R * 128"), std::string::npos);
  p.seqlen_k = 1024;
  EXPECT_NE(ring_problem_error(p, 1).find("self-attention"), std::string::npos);
  p.seqlen_q = 1024;
  EXPECT_NE(ring_problem_error(p, 9).find("1 to 8"), std::string::npos);
}

TEST(Config, DefaultsFollowTheGpusAndTheVariablesOverride) {
  RingConfig c = parse_config(nullptr, nullptr, 4, true);
  EXPECT_EQ(c.ranks, 4);
  EXPECT_EQ(c.transport, TransportKind::nccl);
  c = parse_config(nullptr, nullptr, 0, true);  // no GPU: one rank
  EXPECT_EQ(c.ranks, 1);
  EXPECT_EQ(c.transport, TransportKind::copy);
  c = parse_config(nullptr, nullptr, 16, true);  // at most 8
  EXPECT_EQ(c.ranks, 8);
  c = parse_config("4", nullptr, 1, true);  // more ranks than GPUs: simulated
  EXPECT_EQ(c.transport, TransportKind::copy);
  c = parse_config("2", "copy", 8, true);
  EXPECT_EQ(c.ranks, 2);
  EXPECT_EQ(c.transport, TransportKind::copy);
  c = parse_config("2", nullptr, 8, false);  // NCCL not built
  EXPECT_EQ(c.transport, TransportKind::copy);
  EXPECT_THROW(parse_config("0", nullptr, 1, true), std::invalid_argument);
  EXPECT_THROW(parse_config("3x", nullptr, 1, true), std::invalid_argument);
  EXPECT_THROW(parse_config("9", nullptr, 1, true), std::invalid_argument);
  EXPECT_THROW(parse_config("4", "nccl", 2, true), std::invalid_argument);
  EXPECT_THROW(parse_config("2", "mpi", 2, true), std::invalid_argument);
}

}  // namespace
}  // namespace ring_attention
