// Chapter 07's benchmark: block-sparse forward time against mask density, next to chapter 06's
// dense kernel on the same shapes, in one binary (Google Benchmark, CUDA events).
//   ./07_block_sparse_bench --benchmark_out=sparse.json --benchmark_out_format=json
//   python3 scripts/plot_sparse.py sparse.json sparse.png
// Shapes: bf16 (--dtype), D = 64 and 128, seqlen 4k .. 32k (--max-seqlen), batch =
// max(1, 16k / seqlen) (FlashAttention-2's shapes, and batch 1 at 32k), heads = 2048 / D.
// Names: sparse/07_block_sparse/bf16/D128/blockk128/random/density:0.10/seqlen:8192 and
// dense06/06_tensor_core/bf16/D128/full/seqlen:8192. Counters: ms_median, TFLOPS over the
// active blocks' FLOPs only (block_sparse::forward_flops), density (the mask's exact one).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "06_tensor_core/tensor_core.h"
#include "07_block_sparse/block_sparse.h"
#include "common/harness/bench_harness.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/gpu_timer.h"

namespace {

namespace bs = block_sparse;

struct Spec {
  bs::HeadPattern pattern;
  int block_k;
};

// Times `forward` with CUDA events, one iteration per timing; returns the median seconds.
template <class Forward>
double time_it(benchmark::State& state, Forward forward) {
  forward();  // warm-up
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  fa::cuda::GpuTimer timer;
  std::vector<double> seconds;
  for (auto _ : state) {
    timer.start();
    forward();
    const double s = timer.stop_ms() * 1e-3;
    state.SetIterationTime(s);
    seconds.push_back(s);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

struct Inputs {
  fa::cuda::DeviceBuffer q, k, v, o, lse;
  explicit Inputs(const fa::Problem& p)
      : q(p.q_elems() * fa::dtype_size(p.dtype)), k(p.kv_elems() * fa::dtype_size(p.dtype)),
        v(p.kv_elems() * fa::dtype_size(p.dtype)), o(p.o_elems() * fa::dtype_size(p.dtype)),
        lse(p.lse_elems() * sizeof(float)) {
    // Random inputs, never zeros: zeros hide wrong indexing and can run faster than real data.
    fa::cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);
    fa::cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
    fa::cuda::fill_random(v.get(), p.kv_elems(), p.dtype, 3, nullptr);
  }
};

void run_sparse(benchmark::State& state, const fa::Problem& p, const Spec& spec) {
  const bs::BlockMask mask = bs::make_mask(p, spec.block_k, {spec.pattern});
  const bs::DeviceBlockMask device_mask(mask);
  Inputs in(p);
  const double median = time_it(state, [&] {
    bs::forward(p, device_mask, in.q.get(), in.k.get(), in.v.get(), in.o.get(), in.lse.as<float>(), nullptr);
  });
  state.counters["ms_median"] = median * 1e3;
  state.counters["TFLOPS"] = bs::forward_flops(p, mask) / median / 1e12;
  state.counters["density"] = mask.density();
  state.counters["block_k"] = spec.block_k;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
}

void run_dense06(benchmark::State& state, const fa::Problem& p) {
  Inputs in(p);
  const double median = time_it(state, [&] {
    tensor_core::forward(p, in.q.get(), in.k.get(), in.v.get(), in.o.get(), in.lse.as<float>(), nullptr);
  });
  state.counters["ms_median"] = median * 1e3;
  state.counters["TFLOPS"] = fa::forward_flops(p) / median / 1e12;
  state.counters["density"] = 1.0;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
}

void add(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.3);
}

void register_all(fa::Dtype dtype, int max_seqlen) {
  using P = bs::Pattern;
  for (int d : {64, 128}) {
    for (int seqlen = 4096; seqlen <= max_seqlen; seqlen *= 2) {
      fa::Problem p;
      p.batch = std::max(1, 16384 / seqlen);
      p.heads = p.kv_heads = 2048 / d;
      p.seqlen_q = p.seqlen_k = seqlen;
      p.head_dim = d;
      p.dtype = dtype;
      const std::string shape = std::string(fa::dtype_name(dtype)) + "/D" + std::to_string(d);
      const std::string len = "/seqlen:" + std::to_string(seqlen);
      fa::Problem causal = p;
      causal.causal = true;
      add("dense06/06_tensor_core/" + shape + "/full" + len, [p](benchmark::State& s) { run_dense06(s, p); });
      add("dense06/06_tensor_core/" + shape + "/causal" + len,
          [causal](benchmark::State& s) { run_dense06(s, causal); });
      // Random masks, not causal: every query block keeps round(density * Tk) key blocks, so the
      // work is the same in every block of the grid and proportional to the density.
      for (int block_k : {128, 64}) {
        for (double density : {1.0, 0.75, 0.5, 0.25, 0.1}) {
          char tag[64];
          std::snprintf(tag, sizeof(tag), "/blockk%d/random/density:%.2f", block_k, density);
          const Spec spec{.pattern = {.pattern = P::random, .density = density, .seed = 7}, .block_k = block_k};
          add("sparse/07_block_sparse/" + shape + tag + len, [p, spec](benchmark::State& s) { run_sparse(s, p, spec); });
        }
      }
      const Spec local{.pattern = {.pattern = P::local, .window = 1}, .block_k = 128};
      const Spec streaming{.pattern = {.pattern = P::streaming, .window = 2, .sink = 1}, .block_k = 128};
      const Spec dense{.pattern = {.pattern = P::dense}, .block_k = 128};
      add("sparse/07_block_sparse/" + shape + "/blockk128/local:1" + len,
          [p, local](benchmark::State& s) { run_sparse(s, p, local); });
      add("sparse/07_block_sparse/" + shape + "/blockk128/streaming:1+2" + len,
          [p, streaming](benchmark::State& s) { run_sparse(s, p, streaming); });
      // Causal attention through an all-active mask: the kernel's causal cut (walk_length) must
      // give 06's causal time.
      add("sparse/07_block_sparse/" + shape + "/blockk128/dense_causal" + len,
          [causal, dense](benchmark::State& s) { run_sparse(s, causal, dense); });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  fa::Dtype dtype;
  int max_seqlen;
  try {
    dtype = fa::parse_dtype(fa::bench::take_flag(argc, argv, "--dtype", "bf16"));
    max_seqlen = fa::bench::take_int_flag(argc, argv, "--max-seqlen", 32768);
  } catch (const std::exception& e) {
    std::cerr << "07_block_sparse benchmark: " << e.what() << "\n";
    return 2;
  }
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) {
    std::cerr << "07_block_sparse benchmark: nothing to time: " << reason << "\n";
    return 0;
  }
  register_all(dtype, max_seqlen);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
