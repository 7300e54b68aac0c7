// Chapter 12's plan (plan.h): the zig-zag split, the pairs, the schedule and the configuration.
#include "12_ring_attention/plan.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace ring_attention {

std::vector<int> chunk_bounds(int seqlen, int ranks) {
  const int n = 2 * ranks;
  std::vector<int> bounds(n + 1);
  for (int c = 0; c <= n; ++c) bounds[c] = static_cast<int>(std::int64_t{c} * seqlen / n);
  return bounds;
}

const char* pair_name(Pair pair) {
  switch (pair) {
    case Pair::full: return "full";
    case Pair::causal: return "causal";
    default: return "skipped";
  }
}

std::vector<Task> rank_schedule(int rank, int ranks, bool causal) {
  std::vector<Task> tasks;
  const RankChunks mine = rank_chunks(rank, ranks);
  for (int step = 0; step < ranks; ++step) {
    const RankChunks held = rank_chunks(block_owner(rank, step, ranks), ranks);
    for (int qs = 0; qs < 2; ++qs)
      for (int ks = 0; ks < 2; ++ks) {
        const Pair pair = classify(mine[qs], held[ks], causal);
        if (pair != Pair::skipped) tasks.push_back({step, qs, ks, mine[qs], held[ks], pair});
      }
  }
  return tasks;
}

fa::Problem pair_problem(const fa::Problem& p, int ranks, Pair pair) {
  fa::Problem chunk = p;
  chunk.seqlen_q = chunk.seqlen_k = p.seqlen_q / (2 * ranks);
  chunk.causal = pair == Pair::causal;
  return chunk;
}

std::string ring_problem_error(const fa::Problem& p, int ranks) {
  const std::string who = "12_ring_attention: ";
  if (ranks < 1 || ranks > kMaxRanks)
    return who + "a ring of " + std::to_string(ranks) + " ranks; it takes 1 to " + std::to_string(kMaxRanks);
  if (p.seqlen_q != p.seqlen_k)
    return who + "self-attention only (seqlen_q == seqlen_k: the queries and keys are one split sequence); got Sq=" +
           std::to_string(p.seqlen_q) + " Sk=" + std::to_string(p.seqlen_k);
  const int multiple = 2 * ranks * kChunkMultiple;
  if (p.seqlen_q % multiple != 0 || p.seqlen_q == 0)
    return who + "seqlen " + std::to_string(p.seqlen_q) + " must be a positive multiple of 2R * 128 = " +
           std::to_string(multiple) + " for a ring of R = " + std::to_string(ranks) +
           " ranks (2R equal chunks, each a whole number of 128-row tiles)";
  return "";
}

const char* transport_name(TransportKind kind) { return kind == TransportKind::nccl ? "nccl" : "copy"; }

RingConfig parse_config(const char* ranks_env, const char* transport_env, int gpus, bool have_nccl) {
  RingConfig config;
  if (ranks_env != nullptr && *ranks_env != '\0') {
    char* end = nullptr;
    const long r = std::strtol(ranks_env, &end, 10);
    if (*end != '\0' || r < 1 || r > kMaxRanks)
      throw std::invalid_argument(std::string("12_ring_attention: FA_RING_RANKS='") + ranks_env +
                                  "' is not a ring size; it takes 1 to " + std::to_string(kMaxRanks));
    config.ranks = static_cast<int>(r);
  } else {
    config.ranks = std::clamp(gpus, 1, kMaxRanks);
  }
  const bool nccl_fits = have_nccl && gpus >= config.ranks;
  if (transport_env == nullptr || *transport_env == '\0') {
    config.transport = nccl_fits ? TransportKind::nccl : TransportKind::copy;
  } else if (std::string(transport_env) == "copy") {
    config.transport = TransportKind::copy;
  } else if (std::string(transport_env) == "nccl") {
    if (!nccl_fits)
      throw std::invalid_argument("12_ring_attention: FA_RING_TRANSPORT=nccl needs one GPU a rank (" +
                                  std::to_string(config.ranks) + ") and NCCL; this machine has " +
                                  std::to_string(gpus) + " GPU(s)" + (have_nccl ? "" : " and no NCCL"));
    config.transport = TransportKind::nccl;
  } else {
    throw std::invalid_argument(std::string("12_ring_attention: FA_RING_TRANSPORT='") + transport_env +
                                "' is neither nccl nor copy");
  }
  return config;
}

}  // namespace ring_attention
