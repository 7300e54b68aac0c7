// Chapter 12's benchmark: the ring's forward and forward + backward on per-rank resident blocks
// (Ring: no scatter or gather timed), for rings of 1, 2, 4 and 8 ranks as the GPUs allow.
//   ./12_ring_attention_bench [--rank-seqlen 8192] [--transport nccl|copy] [Google Benchmark flags]
//   ./12_ring_attention_bench --timeline FILE [--rank-seqlen N] [--transport nccl|copy]
// --timeline FILE: instead of the benchmarks, one causal forward + backward (bf16, D 128, 16 heads)
// on the largest ring the GPUs allow (two simulated ranks with copy), after a warm-up, with each
// rank's streams timed step by step (Ring::record_timeline), written to FILE as JSON;
// scripts/plot_ring_timeline.py draws it and sums it up.
// Each rank holds --rank-seqlen tokens (two zig-zag chunks), so a ring of R ranks attends a sequence
// of R times that. Counters: TFLOPS (the whole sequence's FLOPs over the median wall time, all
// ranks together), TFLOPS_per_rank, and scaling_efficiency = TFLOPS on R ranks / (R x TFLOPS of
// one rank on the same per-rank block), the row of R = 1 run first in the same process.
// NCCL rows need R GPUs; with copy (simulated ranks sharing one GPU) the efficiency is about 1 / R.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "12_ring_attention/ring.h"
#include "common/cuda/cuda_check.h"
#include "common/harness/bench_harness.h"

namespace {

using ring_attention::Ring;
using ring_attention::RingConfig;
using ring_attention::TransportKind;

// The one-rank TFLOP/s of each row kind ("fwd/bf16/D128/causal"), for scaling_efficiency.
std::map<std::string, double>& one_rank_tflops() {
  static std::map<std::string, double> m;
  return m;
}

void run(benchmark::State& state, const fa::Problem& p, RingConfig config, bool with_backward, const std::string& kind) {
  Ring ring(p, ring_attention::transport_for(config));
  const fa::Problem c = ring_attention::pair_problem(p, config.ranks, ring_attention::Pair::full);
  for (int r = 0; r < ring.ranks(); ++r) {  // seeded random blocks, never zeros
    FA_CUDA_CHECK(cudaSetDevice(ring.device(r)));
    fa::cuda::fill_random(ring.q(r), 2 * c.q_elems(), p.dtype, 1 + r, ring.stream(r));
    fa::cuda::fill_random(ring.kv(r), 4 * c.kv_elems(), p.dtype, 101 + r, ring.stream(r));
    fa::cuda::fill_random(ring.dout(r), 2 * c.q_elems(), p.dtype, 201 + r, ring.stream(r));
  }
  auto step = [&] {
    ring.forward();
    if (with_backward) ring.backward();
  };
  step();  // warm-up: kernels loaded, workspaces grown
  ring.synchronize();
  std::vector<double> seconds;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ring.synchronize();  // every rank, every device: wall time is the ring's time
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    seconds.push_back(s);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  const double median = seconds[seconds.size() / 2];
  const double flops = fa::forward_flops(p) + (with_backward ? fa::backward_flops(p) : 0.0);
  const double tflops = flops / median * 1e-12;
  state.counters["TFLOPS"] = tflops;
  state.counters["TFLOPS_per_rank"] = tflops / config.ranks;
  state.counters["ms_median"] = median * 1e3;
  state.counters["ranks"] = config.ranks;
  if (config.ranks == 1) one_rank_tflops()[kind] = tflops;
  if (const auto base = one_rank_tflops().find(kind); base != one_rank_tflops().end())
    state.counters["scaling_efficiency"] = tflops / (config.ranks * base->second);
}

// --timeline FILE: the spans of one forward + backward (see the top of this file).
int write_timeline(const std::string& file, int rank_seqlen, RingConfig config) {
  fa::Problem p = fa::default_problem(fa::Dtype::bf16);
  p.batch = 1, p.heads = p.kv_heads = 16, p.head_dim = 128, p.causal = true;
  p.seqlen_q = p.seqlen_k = rank_seqlen * config.ranks;
  Ring ring(p, ring_attention::transport_for(config));
  const fa::Problem c = ring_attention::pair_problem(p, config.ranks, ring_attention::Pair::full);
  for (int r = 0; r < ring.ranks(); ++r) {
    FA_CUDA_CHECK(cudaSetDevice(ring.device(r)));
    fa::cuda::fill_random(ring.q(r), 2 * c.q_elems(), p.dtype, 1 + r, ring.stream(r));
    fa::cuda::fill_random(ring.kv(r), 4 * c.kv_elems(), p.dtype, 101 + r, ring.stream(r));
    fa::cuda::fill_random(ring.dout(r), 2 * c.q_elems(), p.dtype, 201 + r, ring.stream(r));
  }
  for (int warm = 0; warm < 2; ++warm) ring.forward(), ring.backward();
  ring.record_timeline(true);
  ring.forward();
  ring.backward();
  const std::vector<ring_attention::Span> spans = ring.timeline();
  ring.record_timeline(false);
  cudaDeviceProp prop{};
  FA_CUDA_CHECK(cudaGetDeviceProperties(&prop, ring.device(0)));
  std::ofstream out(file);
  out << "{\"gpu\": \"" << prop.name << "\", \"ranks\": " << config.ranks << ", \"transport\": \""
      << ring_attention::transport_name(config.transport) << "\", \"dtype\": \"bf16\", \"head_dim\": 128, \"heads\": 16"
      << ", \"causal\": true, \"rank_seqlen\": " << rank_seqlen << ",\n \"spans\": [";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const ring_attention::Span& s = spans[i];
    out << (i ? ",\n  " : "\n  ") << "{\"rank\": " << s.rank << ", \"stream\": \"" << (s.comm ? "comm" : "compute")
        << "\", \"what\": \"" << s.what << "\", \"step\": " << s.step << ", \"start_ms\": " << s.start_ms
        << ", \"end_ms\": " << s.end_ms << "}";
  }
  out << "\n]}\n";
  if (!out) {
    std::cerr << "error: 12_ring_attention_bench: cannot write " << file << "\n";
    return 1;
  }
  std::cout << "12_ring_attention_bench: " << spans.size() << " spans of " << config.ranks << " ranks in " << file << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rank_seqlen = 0;
  std::string transport, timeline;
  try {
    rank_seqlen = fa::bench::take_int_flag(argc, argv, "--rank-seqlen", 8192);
    transport = fa::bench::take_flag(argc, argv, "--transport", "");
    timeline = fa::bench::take_flag(argc, argv, "--timeline", "");
    if (!transport.empty() && transport != "nccl" && transport != "copy")
      throw std::invalid_argument("--transport: nccl or copy, not '" + transport + "'");
  } catch (const std::invalid_argument& e) {
    std::cerr << "error: 12_ring_attention_bench: " << e.what() << "\n";
    return 2;
  }
  const std::string reason = fa::unavailable_reason(ring_attention::chapter().support);
  if (!reason.empty()) {
    std::cout << "12_ring_attention_bench: nothing timed: " << reason << "\n";
    return 0;
  }
  const int gpus = ring_attention::visible_gpus();
  const bool nccl = transport == "nccl" || (transport.empty() && gpus > 1);
  if (rank_seqlen <= 0 || rank_seqlen % (2 * ring_attention::kChunkMultiple) != 0) {
    std::cerr << "error: 12_ring_attention_bench: --rank-seqlen must be a positive multiple of "
              << 2 * ring_attention::kChunkMultiple << "\n";
    return 2;
  }
  if (!timeline.empty()) {
    const int ranks = nccl ? std::min(gpus, 8) : 2;
    if (ranks < 2) {
      std::cerr << "error: 12_ring_attention_bench --timeline: a ring of NCCL ranks needs 2 GPUs or more\n";
      return 2;
    }
    return write_timeline(timeline, rank_seqlen,
                          RingConfig{.ranks = ranks, .transport = nccl ? TransportKind::nccl : TransportKind::copy});
  }
  for (int ranks : {1, 2, 4, 8}) {
    if (nccl && ranks > gpus) break;
    const RingConfig config{.ranks = ranks, .transport = nccl ? TransportKind::nccl : TransportKind::copy};
    for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
      for (int d : {64, 128})
        for (bool causal : {false, true})
          for (bool with_backward : {false, true}) {
            fa::Problem p = fa::default_problem(dtype);
            p.batch = 1, p.heads = p.kv_heads = 2048 / d, p.head_dim = d, p.causal = causal;
            p.seqlen_q = p.seqlen_k = rank_seqlen * ranks;
            const std::string kind = std::string(with_backward ? "fwd_bwd/" : "fwd/") + fa::dtype_name(dtype) + "/D" +
                                     std::to_string(d) + (causal ? "/causal" : "/full");
            const std::string name = "ring/" + kind + "/" + ring_attention::transport_name(config.transport) +
                                     "/ranks:" + std::to_string(ranks) + "/rank_seqlen:" + std::to_string(rank_seqlen);
            benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
              run(state, p, config, with_backward, kind);
            })->UseManualTime()->Unit(benchmark::kMillisecond);
          }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
