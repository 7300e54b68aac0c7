// Chapter 10's benchmarks: ./10_decoding_bench --benchmark_filter=decode/
//   decode/...: issue "10_decoding"'s rows -- bf16, H = 32, Hkv = 8, D = 128, seqlen_q = 1, batch 1
//     and 8, seqlen_k 4k, 16k, 64k -- with the L2 cache flushed before every timed run (a 256 MiB
//     memset, as triton.testing.do_bench does: at batch 1 and 4k all of K and V would otherwise sit
//     in the 50 MB L2). Counters: GBps (K and V bytes read per second, from the median run), splits
//     (the plan's pieces per key range), ms_median.
//     decode/10_decoding.stream_k/...: the same rows for the stream-K step (steps/).
//     --decode-head-dim 64|256 times the rows at that head dim instead of 128 (D in the name).
//   fwd/...: FlashAttention-2's shapes, the shared benchmark of every chapter.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "10_decoding/decoding.h"
#include "10_decoding/steps/steps.h"
#include "common/bench_harness.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"

namespace {

void run_decode(benchmark::State& state, fa::Problem p, fa::ForwardFn forward_fn) {
  const std::size_t elem = fa::dtype_size(p.dtype);
  fa::cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), flush(256u << 20);
  fa::cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);  // never zeros
  fa::cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
  fa::cuda::fill_random(v.get(), p.kv_elems(), p.dtype, 3, nullptr);
  auto forward = [&] { forward_fn(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr); };
  forward();  // warm-up
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  const double median = fa::bench::median_seconds(state, forward, [&] {
    FA_CUDA_CHECK(cudaMemsetAsync(flush.get(), 0, flush.bytes(), nullptr));  // evicts K and V from L2
  });
  state.counters["GBps"] = static_cast<double>(k.bytes() + v.bytes()) / median / 1e9;
  state.counters["ms_median"] = median * 1e3;
  state.counters["splits"] = decoding::plan(p).splits;  // the plain split's (stream-K rows too)
  state.counters["batch"] = p.batch;
  state.counters["seqlen_k"] = p.seqlen_k;
}

void register_decode(const std::string& chapter, fa::ForwardFn forward_fn, int head_dim) {
  for (int batch : {1, 8})
    for (int seqlen_k : {4096, 16384, 65536}) {
      fa::Problem p;
      p.batch = batch, p.heads = 32, p.kv_heads = 8, p.seqlen_q = 1, p.seqlen_k = seqlen_k;
      p.head_dim = head_dim, p.dtype = fa::Dtype::bf16;
      const std::string name = "decode/" + chapter + "/bf16/H32x8/D" + std::to_string(head_dim) + "/B" + std::to_string(batch) +
                               "/seqlen_k:" + std::to_string(seqlen_k);
      benchmark::RegisterBenchmark(name.c_str(), [p, forward_fn](benchmark::State& s) { run_decode(s, p, forward_fn); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
}

}  // namespace

int main(int argc, char** argv) {
  int head_dim = 128;  // --decode-head-dim N: the decode rows at another supported head dim
  for (int a = 1; a + 1 < argc; ++a)
    if (std::strcmp(argv[a], "--decode-head-dim") == 0) {
      head_dim = std::atoi(argv[a + 1]);
      const fa::Support& s = decoding::chapter().support;
      if (!fa::supports_head_dim(s, head_dim)) {
        std::fprintf(stderr, "--decode-head-dim %s: %s takes head dim %s\n", argv[a + 1], s.chapter.c_str(),
                     fa::head_dims_words(s).c_str());
        return 2;
      }
      for (int b = a; b + 2 <= argc; ++b) argv[b] = argv[b + 2];  // leave Google Benchmark the rest
      argc -= 2;
      break;
    }
  if (fa::cuda::unavailable_reason().empty()) {
    register_decode("10_decoding", decoding::forward, head_dim);
    for (const fa::Step& step : decoding::steps::all())  // the steps that take this head dim
      if (fa::supports_head_dim(step.chapter.support, head_dim))
        register_decode("10_decoding." + step.name, step.chapter.forward, head_dim);
  }
  return fa::bench::main(decoding::chapter(), argc, argv);
}
