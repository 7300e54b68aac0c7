// Chapter 08's backward on FlashAttention-2's benchmark shapes (Google Benchmark, CUDA events):
//   ./08_backward_bench [--max-seqlen N] [Google Benchmark flags]
// seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D, D = 64 and 128, causal and not;
// f32 (CUDA cores), bf16 and f16 (tensor cores), and bf16 in the deterministic mode
// (bwd/08_backward_deterministic/bf16/..., a column of its own in scripts/summarize.py).
// One dtype: --benchmark_filter=/bf16/
// Only the backward is timed (the preprocessing kernel included); O and LSE come from one forward
// run before the loop. Counters: TFLOPS (fa::backward_flops over the median iteration),
// ms_median, extra_mem_MiB (device memory beyond the tensors: the D_i workspace).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "08_backward/backward.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"
#include "common/gpu_timer.h"

namespace {

void run_case(benchmark::State& state, const fa::BackwardChapter& chapter, fa::Problem p) {
  namespace cuda = fa::cuda;
  const std::size_t elem = fa::dtype_size(p.dtype);
  cuda::release_workspace();
  cuda::reset_peak();
  const std::size_t base = cuda::memory_stats().current;
  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * elem),
      dq(p.q_elems() * elem), dk(p.kv_elems() * elem), dv(p.kv_elems() * elem);
  // Random inputs, never zeros: zeros hide wrong indexing and can run faster than real data.
  cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);
  cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
  cuda::fill_random(v.get(), p.kv_elems(), p.dtype, 3, nullptr);
  cuda::fill_random(dout.get(), p.o_elems(), p.dtype, 4, nullptr);
  auto backward = [&] {
    chapter.backward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), dout.get(), dq.get(), dk.get(),
                     dv.get(), nullptr);
  };
  try {
    chapter.forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr);
    backward();  // warm-up; also allocates the workspace, outside the timed loop
    FA_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const std::invalid_argument& e) {
    state.SkipWithError(e.what());
    return;
  }
  cuda::GpuTimer timer;
  std::vector<double> seconds;
  for (auto _ : state) {
    timer.start();
    backward();
    const double s = timer.stop_ms() * 1e-3;
    state.SetIterationTime(s);
    seconds.push_back(s);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::size_t io = 0;
  for (const cuda::DeviceBuffer* b : {&q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv}) io += b->bytes();
  state.counters["TFLOPS"] = fa::backward_flops(p) / median / 1e12;
  state.counters["ms_median"] = median * 1e3;
  state.counters["extra_mem_MiB"] = (cuda::memory_stats().peak - base - io) / 1048576.0;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
  cuda::release_workspace();
}

}  // namespace

int main(int argc, char** argv) {
  const fa::BackwardChapter& chapter = backward::chapter();
  int max_seqlen = 16384;
  for (int a = 1; a + 1 < argc; ++a) {  // our one flag, removed before Google Benchmark sees argv
    if (std::strcmp(argv[a], "--max-seqlen") == 0) {
      max_seqlen = std::atoi(argv[a + 1]);
      for (int b = a; b + 2 <= argc; ++b) argv[b] = argv[b + 2];
      argc -= 2;
      break;
    }
  }
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) {
    std::cerr << chapter.support.chapter << " benchmark: nothing to time: " << reason << "\n";
    return 0;
  }
  struct Variant {
    fa::Dtype dtype;
    fa::BackwardFn backward;
    std::string chapter;
  };
  const std::string& name = chapter.support.chapter;
  const Variant variants[] = {{fa::Dtype::f32, chapter.backward, name},
                              {fa::Dtype::bf16, chapter.backward, name},
                              {fa::Dtype::f16, chapter.backward, name},
                              {fa::Dtype::bf16, chapter.deterministic, name + "_deterministic"}};
  static std::vector<fa::BackwardChapter> chapters;  // one per variant, alive while the benchmarks run
  chapters.reserve(std::size(variants));
  for (const Variant& variant : variants) {
    chapters.push_back(chapter);
    chapters.back().backward = variant.backward;
    const fa::BackwardChapter* c = &chapters.back();
    for (int d : {64, 128}) {
      for (bool causal : {false, true}) {
        for (int seqlen = 512; seqlen <= std::min(16384, max_seqlen); seqlen *= 2) {
          fa::Problem p;
          p.batch = 16384 / seqlen;
          p.heads = p.kv_heads = 2048 / d;
          p.seqlen_q = p.seqlen_k = seqlen;
          p.head_dim = d;
          p.causal = causal;
          p.dtype = variant.dtype;
          const std::string bench = "bwd/" + variant.chapter + "/" + fa::dtype_name(variant.dtype) + "/D" + std::to_string(d) +
                                    (causal ? "/causal" : "/full") + "/seqlen:" + std::to_string(seqlen);
          benchmark::RegisterBenchmark(bench.c_str(), [c, p](benchmark::State& s) { run_case(s, *c, p); })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond)
              ->MinTime(0.3);
        }
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
