// Chapter 12's ring: R ranks, each with a compute stream that attends its query chunks to the K/V
// block it holds, and a communication stream that meanwhile passes the next block on
// (transport.h). Written once for both transports; every chunk pair is one call of chapter 09's
// forward or chapter 11's backward (plan.h says which pairs, and which are causal).
//
//   forward, step s = 0 .. R - 1 on every rank r (holding the block of rank (r - s) mod R):
//     comm:    wait until compute is done with step s - 1; pass the block on (r -> r + 1)
//     compute: for each pair of the step: (O_p, LSE_p) = 09's forward; merge into (O_acc, LSE_acc)
//     compute: wait for the next block
//   backward: the same walk with the final O and LSE; each pair's dQ, dK, dV (11's backward) are
//     summed in fp32, dQ at home, dK and dV in a buffer that travels with its block and reaches
//     its own rank after the R-th pass.
#include "12_ring_attention/ring.h"

#include <algorithm>
#include <stdexcept>

#include "09_flash_v3/flash_v3.h"
#include "11_backward_v3/backward_v3.h"
#include "12_ring_attention/rank.h"
#include "12_ring_attention/ring_kernels.cuh"
#include "common/cuda/cuda_check.h"

namespace ring_attention {
namespace {

unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(std::clamp<std::int64_t>((n + 255) / 256, 1, 4096)); }

template <class F>
void with_dtype(fa::Dtype dtype, F&& f) {
  if (dtype == fa::Dtype::bf16) f(__nv_bfloat16{});
  else f(__half{});
}

}  // namespace

// One pass of every rank's block (send[r] -> rank r + 1, into recv[r + 1]), on the comm streams,
// each first waiting until its compute stream is done with what it last recorded (`computed`).
void Ring::pass(std::size_t bytes, const std::vector<const void*>& send, const std::vector<void*>& recv,
                const char* what, int step) {
  std::vector<RankLink> links;
  std::vector<int> spans;
  for (int r = 0; r < ranks(); ++r) {
    FA_CUDA_CHECK(cudaSetDevice(ranks_[r]->device));
    FA_CUDA_CHECK(cudaStreamWaitEvent(ranks_[r]->comm, ranks_[r]->computed, 0));
    spans.push_back(open_span(r, true, what, step));
    links.push_back({send[r], recv[r], ranks_[r]->comm});
  }
  transport_->pass_blocks(links, bytes);
  if (!timeline_.recording()) return;
  for (int r = 0; r < ranks(); ++r) {
    FA_CUDA_CHECK(cudaSetDevice(ranks_[r]->device));
    timeline_.close(r, spans[r]);
  }
}

// Step `step`'s blocks go on to the next rank while they are attended (every step but the last);
// each rank's `arrived` marks its next block landed, for its compute stream to wait on.
void Ring::pass_next_block(int step) {
  if (step + 1 >= ranks()) return;
  const fa::Problem c = pair_problem(p_, ranks(), Pair::full);
  std::vector<const void*> send;
  std::vector<void*> recv;
  for (int r = 0; r < ranks(); ++r) send.push_back(block(r, step)), recv.push_back(block(r, step + 1));
  pass(4 * c.kv_elems() * fa::dtype_size(p_.dtype), send, recv, "pass K,V", step);  // [K | V] of both chunks
  for (auto& rank : ranks_) {
    FA_CUDA_CHECK(cudaSetDevice(rank->device));
    FA_CUDA_CHECK(cudaEventRecord(rank->arrived, rank->comm));
  }
}

std::vector<std::vector<Task>> Ring::schedules() const {
  std::vector<std::vector<Task>> schedule;
  for (int r = 0; r < ranks(); ++r) schedule.push_back(rank_schedule(r, ranks(), p_.causal));
  return schedule;
}

void Ring::forward() {
  const int R = ranks();
  const fa::Problem c = pair_problem(p_, R, Pair::full);
  const std::size_t elem = fa::dtype_size(p_.dtype);
  with_dtype(p_.dtype, [&](auto type) {
    using T = decltype(type);
    for (int r = 0; r < R; ++r) {  // O_acc = 0, LSE_acc = -inf: no key seen yet
      Rank& rank = *ranks_[r];
      FA_CUDA_CHECK(cudaSetDevice(rank.device));
      const int span = open_span(r, false, "start", -1);
      FA_CUDA_CHECK(cudaMemsetAsync(rank.o_acc.get(), 0, rank.o_acc.bytes(), rank.compute));
      fill_kernel<<<grid_for(2 * c.lse_elems()), 256, 0, rank.compute>>>(
          rank.lse_acc.as<float>(), -std::numeric_limits<float>::infinity(), 2 * c.lse_elems());
      FA_CHECK_LAUNCH();
      timeline_.close(r, span);
      FA_CUDA_CHECK(cudaEventRecord(rank.computed, rank.compute));
    }
    const std::vector<std::vector<Task>> schedule = schedules();
    for (int s = 0; s < R; ++s) {
      pass_next_block(s);  // the next block travels while this one is attended
      for (int r = 0; r < R; ++r) {
        Rank& rank = *ranks_[r];
        FA_CUDA_CHECK(cudaSetDevice(rank.device));
        const auto* kv = static_cast<const unsigned char*>(block(r, s));
        const int span = open_span(r, false, "forward", s);
        for (const Task& t : schedule[r]) {
          if (t.step != s) continue;
          const fa::Problem pp = pair_problem(p_, R, t.pair);
          // Q_i: [B, H, C, D] chunk q_slot; K_j, V_j: [B, Hkv, C, D] chunks k_slot of the block
          const void* q = static_cast<const unsigned char*>(rank.q.get()) + t.q_slot * c.q_elems() * elem;
          const void* k = kv + t.k_slot * c.kv_elems() * elem;
          const void* v = kv + (2 + t.k_slot) * c.kv_elems() * elem;
          flash_v3::forward(pp, q, k, v, rank.o_part.get(), rank.lse_part.as<float>(), rank.compute);
          merge_kernel<T><<<static_cast<unsigned>((c.lse_elems() + kRowsPerBlock - 1) / kRowsPerBlock),
                            32 * kRowsPerBlock, 0, rank.compute>>>(
              rank.o_acc.as<float>() + t.q_slot * c.q_elems(), rank.lse_acc.as<float>() + t.q_slot * c.lse_elems(),
              rank.o_part.as<T>(), rank.lse_part.as<float>(), c.lse_elems(), c.head_dim);
          FA_CHECK_LAUNCH();
        }
        timeline_.close(r, span);
        FA_CUDA_CHECK(cudaEventRecord(rank.computed, rank.compute));
        if (s + 1 < R) FA_CUDA_CHECK(cudaStreamWaitEvent(rank.compute, rank.arrived, 0));
      }
    }
    for (int r = 0; r < R; ++r) {  // O and LSE of the rank's two query chunks, as the API returns them
      Rank& rank = *ranks_[r];
      FA_CUDA_CHECK(cudaSetDevice(rank.device));
      const int span = open_span(r, false, "finish", -1);
      convert_kernel<T><<<grid_for(2 * c.q_elems()), 256, 0, rank.compute>>>(rank.o_acc.as<float>(),
                                                                             rank.o.as<T>(), 2 * c.q_elems());
      FA_CHECK_LAUNCH();
      finish_lse_kernel<<<grid_for(2 * c.lse_elems()), 256, 0, rank.compute>>>(
          rank.lse_acc.as<float>(), rank.lse.as<float>(), 2 * c.lse_elems());
      FA_CHECK_LAUNCH();
      timeline_.close(r, span);
    }
  });
}

void Ring::backward() {
  const int R = ranks();
  const fa::Problem c = pair_problem(p_, R, Pair::full);
  const std::size_t elem = fa::dtype_size(p_.dtype);
  const std::int64_t kn = c.kv_elems(), qn = c.q_elems();
  with_dtype(p_.dtype, [&](auto type) {
    using T = decltype(type);
    for (int r = 0; r < R; ++r) {  // the sums start at 0: dQ at home, dK and dV of the rank's own block
      Rank& rank = *ranks_[r];
      FA_CUDA_CHECK(cudaSetDevice(rank.device));
      const int span = open_span(r, false, "start", -1);
      FA_CUDA_CHECK(cudaMemsetAsync(rank.dq_acc.get(), 0, rank.dq_acc.bytes(), rank.compute));
      fa::cuda::DeviceBuffer& sums = rank.dkv_visit[grad_buffer(0)];
      FA_CUDA_CHECK(cudaMemsetAsync(sums.get(), 0, sums.bytes(), rank.compute));
      timeline_.close(r, span);
      FA_CUDA_CHECK(cudaEventRecord(rank.computed, rank.compute));
    }
    const std::vector<std::vector<Task>> schedule = schedules();
    for (int s = 0; s < R; ++s) {
      pass_next_block(s);  // the next block's K and V travel while this one is worked on
      for (int r = 0; r < R; ++r) {
        Rank& rank = *ranks_[r];
        FA_CUDA_CHECK(cudaSetDevice(rank.device));
        const auto* kv = static_cast<const unsigned char*>(block(r, s));
        float* dkv = rank.dkv_visit[grad_buffer(s)].as<float>();  // [dK | dV] [2][B, Hkv, C, D] of the held block
        bool grads_here = s == 0;  // the block's sums arrive from rank r - 1 after step 0
        const fa::cuda::WorkspaceSource source(Workspace::take, &rank.workspace);
        const int span = open_span(r, false, "backward", s);
        for (const Task& t : schedule[r]) {
          if (t.step != s) continue;
          const fa::Problem pp = pair_problem(p_, R, t.pair);
          auto at = [&](const fa::cuda::DeviceBuffer& b, int slot) {
            return static_cast<const unsigned char*>(b.get()) + slot * qn * elem;
          };
          const void* k = kv + t.k_slot * kn * elem;
          const void* v = kv + (2 + t.k_slot) * kn * elem;
          // The final O and LSE of the query chunk: P = exp(S - LSE) is then the pair's exact share
          // of the whole softmax, and D_i = rowsum(dO o O) the whole row's, so the parts add up.
          // The parts come in fp32 (11's backward_f32): rounded to T, each of a row's R parts would
          // add its own rounding error to the sum.
          backward_v3::backward_f32(pp, at(rank.q, t.q_slot), k, v, at(rank.o, t.q_slot),
                                    rank.lse.as<float>() + t.q_slot * c.lse_elems(), at(rank.dout, t.q_slot),
                                    rank.dq_part.as<float>(), rank.dk_part.as<float>(), rank.dv_part.as<float>(),
                                    rank.compute);
          accumulate_kernel<<<grid_for(qn), 256, 0, rank.compute>>>(rank.dq_acc.as<float>() + t.q_slot * qn,
                                                                    rank.dq_part.as<float>(), qn);
          FA_CHECK_LAUNCH();
          if (!grads_here) {  // the first pair's backward ran while the sums were still arriving
            FA_CUDA_CHECK(cudaStreamWaitEvent(rank.compute, rank.grads_arrived, 0));
            grads_here = true;
          }
          accumulate_kernel<<<grid_for(kn), 256, 0, rank.compute>>>(dkv + t.k_slot * kn, rank.dk_part.as<float>(), kn);
          FA_CHECK_LAUNCH();
          accumulate_kernel<<<grid_for(kn), 256, 0, rank.compute>>>(dkv + (2 + t.k_slot) * kn,
                                                                    rank.dv_part.as<float>(), kn);
          FA_CHECK_LAUNCH();
        }
        if (!grads_here) FA_CUDA_CHECK(cudaStreamWaitEvent(rank.compute, rank.grads_arrived, 0));
        timeline_.close(r, span);
        FA_CUDA_CHECK(cudaEventRecord(rank.computed, rank.compute));
      }
      if (R > 1) {  // the sums go on with their block; after the R-th pass they are home
        std::vector<const void*> send;
        std::vector<void*> recv;
        for (int r = 0; r < R; ++r)
          send.push_back(ranks_[r]->dkv_visit[grad_buffer(s)].get()),
              recv.push_back(ranks_[r]->dkv_visit[grad_buffer(s + 1)].get());
        pass(4 * kn * sizeof(float), send, recv, "pass dK,dV", s);
        for (auto& rank : ranks_) {
          FA_CUDA_CHECK(cudaSetDevice(rank->device));
          FA_CUDA_CHECK(cudaEventRecord(rank->grads_arrived, rank->comm));
        }
      }
      for (auto& rank : ranks_)
        if (s + 1 < R) {
          FA_CUDA_CHECK(cudaSetDevice(rank->device));
          FA_CUDA_CHECK(cudaStreamWaitEvent(rank->compute, rank->arrived, 0));
        }
    }
    for (int r = 0; r < R; ++r) {  // dQ, dK and dV rounded to T once
      Rank& rank = *ranks_[r];
      FA_CUDA_CHECK(cudaSetDevice(rank.device));
      if (R > 1) FA_CUDA_CHECK(cudaStreamWaitEvent(rank.compute, rank.grads_arrived, 0));
      const int span = open_span(r, false, "finish", -1);
      convert_kernel<T><<<grid_for(2 * qn), 256, 0, rank.compute>>>(rank.dq_acc.as<float>(), rank.dq.as<T>(), 2 * qn);
      FA_CHECK_LAUNCH();
      convert_kernel<T><<<grid_for(4 * kn), 256, 0, rank.compute>>>(rank.dkv_visit[grads_home_buffer(R)].as<float>(),
                                                                    rank.dkv.as<T>(), 4 * kn);
      FA_CHECK_LAUNCH();
      timeline_.close(r, span);
    }
  });
}

}  // namespace ring_attention
