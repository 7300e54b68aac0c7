// Chapter 12: ring attention (Liu et al. 2023) -- one sequence split over R ranks; each rank keeps
// its queries while the K/V blocks go round the ring, and partial results merge exactly by LSE.
// Every chunk pair runs chapter 09's forward and chapter 11's backward.
//
//   ring_attention::forward / backward   the chapter API on whole [B, H, S, D] tensors: scatter
//                                        the zig-zag chunks to the ranks, run the ring, gather
//                                        (the ring's size and transport: FA_RING_RANKS,
//                                        FA_RING_TRANSPORT; plan.h: parse_config)
//   ring_attention::Ring                 the ring on per-rank resident blocks (benchmarks, scaling)
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "08_backward/harness/backward.h"
#include "12_ring_attention/plan.h"
#include "12_ring_attention/timeline.h"
#include "12_ring_attention/transport.h"
#include "common/cuda/device_memory.h"
#include "common/harness/chapter.h"

namespace ring_attention {

// The ring over R ranks, built once: every rank's resident blocks, its compute and communication
// streams, and the transport. A block is chunk-major: its two chunks (rank_chunks) one after the
// other, each a contiguous [B, H, C, D] tensor (C = S / 2R), so that a chunk pair is a plain
// fa::Problem for chapters 09 and 11. K and V travel together, as one buffer.
class Ring {
 public:
  // p: the whole problem (S = Sq = Sk tokens); throws std::invalid_argument where the ring cannot
  // take it (ring_problem_error, or what 09 and 11 refuse). Allocates every rank's buffers once.
  Ring(const fa::Problem& p, std::shared_ptr<Transport> transport);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // The forward on the resident blocks: q, kv -> o, lse. Queued on the ranks' streams (no host wait).
  void forward();
  // The backward on the resident blocks: q, kv, o, lse, dout -> dq, dkv (dK and dV, K's layout).
  void backward();
  // Waits for every rank's streams.
  void synchronize() const;
  // With `on`, the forward() and backward() calls that follow record a span of each stream's work
  // a step (two CUDA events a span, a few microseconds); timeline() returns them (it waits for
  // every stream). record_timeline(true) waits for every rank, then records each rank's origin.
  void record_timeline(bool on);
  std::vector<Span> timeline() const;

  int ranks() const { return static_cast<int>(ranks_.size()); }
  const fa::Problem& problem() const { return p_; }
  int device(int rank) const { return transport_->device(rank); }
  // Rank r's block of each tensor (device(r)): q, o, dout, dq [2][B, H, C, D]; kv, dkv [K | V],
  // each [2][B, Hkv, C, D]; lse [2][B, H, C] (float). The chunks of a block are rank_chunks(r).
  void* q(int r) const;
  void* kv(int r) const;  // the block the rank owns (where forward() and backward() read it)
  void* o(int r) const;
  float* lse(int r) const;
  void* dout(int r) const;
  void* dq(int r) const;
  void* dkv(int r) const;
  // The rank's compute stream: the chapter API queues its scatter and gather on it.
  cudaStream_t stream(int r) const;
  const Transport& transport() const { return *transport_; }

 private:
  struct Rank;
  void* block(int r, int step) const;  // the K/V buffer rank r attends in step `step`
  void pass(std::size_t bytes, const std::vector<const void*>& send, const std::vector<void*>& recv,
            const char* what, int step);
  // A span of rank r's compute or comm stream in the timeline (the caller has made rank r's device
  // current); -1, and nothing recorded, while no timeline is.
  int open_span(int r, bool comm, const char* what, int step);
  void pass_next_block(int step);  // the blocks of step `step` on to the next rank; `arrived` marks them
  std::vector<std::vector<Task>> schedules() const;  // every rank's rank_schedule
  fa::Problem p_;
  std::shared_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  Timeline timeline_;
};

// The chapter API (chapter.h, backward.h): device pointers on the current device, [B, H, S, D].
// Support: f16 and bf16, head dims 64 and 128, causal or not, GQA; S = Sq = Sk a multiple of
// 2R * 128; a Hopper GPU per rank (09 and 11 run on sm_90a). No window, softcap, varlen, bshd.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);
void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream);

const fa::Chapter& chapter();
const fa::BackwardChapter& backward_chapter();

// The ring the chapter API uses: the one a UseConfig in scope names, else the environment's
// (parse_config over FA_RING_RANKS and FA_RING_TRANSPORT).
RingConfig current_config();
// Makes the chapter API on this thread use `config` while it lives (the tests, the benchmark).
class UseConfig {
 public:
  explicit UseConfig(RingConfig config);
  ~UseConfig();
  UseConfig(const UseConfig&) = delete;
  UseConfig& operator=(const UseConfig&) = delete;

 private:
  bool had_outer_;
  RingConfig outer_;
};
// The transport of `config` (one per configuration and device, made once and kept).
std::shared_ptr<Transport> transport_for(const RingConfig& config);
int visible_gpus();

}  // namespace ring_attention
