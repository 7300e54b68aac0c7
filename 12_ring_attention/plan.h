// Chapter 12's plan, in plain C++ (the CPU tests check it against brute force): the zig-zag split
// of the sequence over R ranks, how each (query chunk, key chunk) pair is attended, which block
// each rank holds at each step of the ring, and the ring's size and transport from the environment.
//
//   The sequence of S tokens is cut into 2R equal chunks of C = S / 2R tokens; rank r keeps chunks
//   r and 2R - 1 - r (its "block", chunk-major: [2][B, H, C, D]). In step s = 0 .. R - 1 rank r
//   holds the K/V block of rank (r - s) mod R and passes it on to rank r + 1.
#pragma once

#include <string>
#include <vector>

#include "common/host/problem.h"

namespace ring_attention {

// The kernels' query tile: a chunk of C tokens is a whole number of them, so that no tile of a
// chunk pair is ragged (S a multiple of 2R * kChunkMultiple).
constexpr int kChunkMultiple = 128;
constexpr int kMaxRanks = 8;

// The 2R + 1 chunk boundaries: chunk c is tokens bounds[c] .. bounds[c + 1] - 1.
std::vector<int> chunk_bounds(int seqlen, int ranks);

// The two chunks rank `rank` keeps, in the order its block holds them (slot 0, slot 1).
struct RankChunks {
  int first, second;
  int operator[](int slot) const { return slot == 0 ? first : second; }
};
constexpr RankChunks rank_chunks(int rank, int ranks) { return {rank, 2 * ranks - 1 - rank}; }

// How a query chunk attends a key chunk: every key (the key chunk comes earlier, or no causal
// mask), causal on the diagonal (the same tokens: Sq == Sk, so the mask is the plain triangle),
// or not at all (every key comes after every query).
enum class Pair { skipped, full, causal };
constexpr Pair classify(int q_chunk, int k_chunk, bool causal) {
  if (!causal || k_chunk < q_chunk) return Pair::full;
  return k_chunk == q_chunk ? Pair::causal : Pair::skipped;
}
const char* pair_name(Pair pair);

// The rank whose K/V block rank `rank` holds in step `step`: blocks move one rank on per step.
constexpr int block_owner(int rank, int step, int ranks) { return ((rank - step) % ranks + ranks) % ranks; }

// The Ring's buffers (ring.cu). K/V: a rank's own block (0, never overwritten) and two buffers the
// visiting blocks alternate through (1, 2); a block is received into the buffer attended one step
// earlier. dK/dV sums: two buffers, the held block's sums in step s, received into the other; after
// the R-th pass the rank's own block's sums are in grads_home_buffer(R).
constexpr int kv_buffer(int step) { return step == 0 ? 0 : 1 + (step - 1) % 2; }
constexpr int grad_buffer(int step) { return step % 2; }
constexpr int grads_home_buffer(int ranks) { return ranks > 1 ? ranks % 2 : 0; }

// One chunk pair a rank attends: in step `step`, its query chunk in slot q_slot against the held
// block's key chunk in slot k_slot.
struct Task {
  int step, q_slot, k_slot;
  int q_chunk, k_chunk;  // chunk indices in the whole sequence
  Pair pair;             // never skipped
};
// Rank r's tasks in the order the ring runs them: step by step, then q_slot, then k_slot.
std::vector<Task> rank_schedule(int rank, int ranks, bool causal);

// The chunk pair's problem: p with Sq = Sk = C and causal only on the diagonal. Run by chapter
// 09's forward and chapter 11's backward on contiguous [B, H, C, D] chunks.
fa::Problem pair_problem(const fa::Problem& p, int ranks, Pair pair);

// "" when the ring takes p over `ranks` ranks, else why not (the chapter throws it as
// std::invalid_argument): self-attention (Sq == Sk) with S a multiple of 2R * 128, 1 <= R <= 8.
std::string ring_problem_error(const fa::Problem& p, int ranks);

// How blocks travel: NCCL between GPUs (a rank a GPU), or cudaMemcpyAsync between simulated ranks
// that share a GPU (NCCL refuses two ranks on one device).
enum class TransportKind { nccl, copy };
const char* transport_name(TransportKind kind);

struct RingConfig {
  int ranks = 1;
  TransportKind transport = TransportKind::copy;
};
// The ring from FA_RING_RANKS (default: the visible GPUs, clamped to 1 .. 8) and
// FA_RING_TRANSPORT=nccl|copy (default nccl when there are >= R GPUs and NCCL is built, else copy).
// Null strings: unset. Throws std::invalid_argument for a value it cannot take, naming the variable.
RingConfig parse_config(const char* ranks_env, const char* transport_env, int gpus, bool have_nccl);

}  // namespace ring_attention
