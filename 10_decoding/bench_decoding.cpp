// Chapter 10's benchmarks: ./10_decoding_bench --benchmark_filter=decode/
//   decode/...: issue "10_decoding"'s rows -- bf16, H = 32, Hkv = 8, D = 128, seqlen_q = 1, batch 1
//     and 8, seqlen_k 4k, 16k, 64k -- with the L2 cache flushed before every timed run (a 256 MiB
//     memset, as triton.testing.do_bench does: at batch 1 and 4k all of K and V would otherwise sit
//     in the 50 MB L2). Counters: GBps (K and V bytes read per second, from the median run), splits
//     (the plan's pieces per key range), ms_median.
//   fwd/...: FlashAttention-2's shapes, the shared benchmark of every chapter.
#include <benchmark/benchmark.h>

#include <string>

#include "10_decoding/decoding.h"
#include "common/bench_harness.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"

namespace {

void run_decode(benchmark::State& state, fa::Problem p) {
  const std::size_t elem = fa::dtype_size(p.dtype);
  fa::cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), flush(256u << 20);
  fa::cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);  // never zeros
  fa::cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
  fa::cuda::fill_random(v.get(), p.kv_elems(), p.dtype, 3, nullptr);
  auto forward = [&] { decoding::forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr); };
  forward();  // warm-up
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  const double median = fa::bench::median_seconds(state, forward, [&] {
    FA_CUDA_CHECK(cudaMemsetAsync(flush.get(), 0, flush.bytes(), nullptr));  // evicts K and V from L2
  });
  state.counters["GBps"] = static_cast<double>(k.bytes() + v.bytes()) / median / 1e9;
  state.counters["ms_median"] = median * 1e3;
  state.counters["splits"] = decoding::plan(p).splits;
  state.counters["batch"] = p.batch;
  state.counters["seqlen_k"] = p.seqlen_k;
}

void register_decode() {
  for (int batch : {1, 8})
    for (int seqlen_k : {4096, 16384, 65536}) {
      fa::Problem p;
      p.batch = batch, p.heads = 32, p.kv_heads = 8, p.seqlen_q = 1, p.seqlen_k = seqlen_k;
      p.head_dim = 128, p.dtype = fa::Dtype::bf16;
      const std::string name = "decode/10_decoding/bf16/H32x8/D128/B" + std::to_string(batch) +
                               "/seqlen_k:" + std::to_string(seqlen_k);
      benchmark::RegisterBenchmark(name.c_str(), [p](benchmark::State& s) { run_decode(s, p); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3);
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (fa::cuda::unavailable_reason().empty()) register_decode();
  return fa::bench::main(decoding::chapter(), argc, argv);
}
