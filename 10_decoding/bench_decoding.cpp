// Chapter 10's benchmarks: ./10_decoding_bench --benchmark_filter=decode/
//   decode/...: the chapter's decode rows (README, Results) -- bf16, H = 32, Hkv = 8, D = 128, seqlen_q = 1, batch 1,
//     8 and 32, seqlen_k 4k, 16k, 64k -- with the L2 cache flushed before every timed run (a 256 MiB
//     memset, as triton.testing.do_bench does: at batch 1 and 4k all of K and V would otherwise sit
//     in the 50 MB L2). Counters: GBps (K and V bytes read per second, from the median run), splits
//     (the plan's pieces per key range), ms_median.
//     decode/10_decoding.stream_k/...: the same rows for the stream-K step (steps/).
//     decode/plain_read/2GiB: the GPU's plain read (fa::cuda::read_every_byte), the rows' ceiling.
//     --decode-head-dim 64|256 times the rows at that head dim instead of 128 (D in the name).
//   cache/...: one step of a cache of 16383 tokens + 1 new (bf16, H32/Hkv8, D128, batch 1 and 8), the
//     contiguous cache (forward_with_cache) against the paged one (steps/paged_cache.h) at pages of
//     16, 64 and 256 tokens in shuffled order; L2 flushed; GBps counts the K and V read.
//   fwd/...: FlashAttention-2's shapes, the shared benchmark of every chapter.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "10_decoding/decoding.h"
#include "10_decoding/steps/paged_cache.h"
#include "10_decoding/steps/steps.h"
#include "common/harness/bench_harness.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"

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
  for (int batch : {1, 8, 32})
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

// One cache step: page 0 = the contiguous cache (forward_with_cache), else pages of that many tokens.
void run_cache_step(benchmark::State& state, int batch, int page) {
  constexpr int kCached = 16383, kHeads = 32, kKvHeads = 8, kD = 128;
  fa::Problem p;
  p.batch = batch, p.heads = kHeads, p.kv_heads = kKvHeads, p.seqlen_q = 1, p.seqlen_k = 1;
  p.head_dim = kD, p.dtype = fa::Dtype::bf16;
  const int tokens = kCached + 1, pages_per_seq = page ? (tokens + page - 1) / page : 0;
  const std::int64_t rows = page ? std::int64_t{batch} * pages_per_seq * page : std::int64_t{batch} * tokens;
  const std::int64_t kv_elems = rows * kKvHeads * kD, new_elems = std::int64_t{batch} * kKvHeads * kD;
  fa::cuda::DeviceBuffer q(p.q_elems() * 2), k(kv_elems * 2), v(kv_elems * 2), kn(new_elems * 2), vn(new_elems * 2),
      o(p.o_elems() * 2), lse(p.lse_elems() * sizeof(float)), flush(256u << 20);
  fa::cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);
  fa::cuda::fill_random(k.get(), kv_elems, p.dtype, 2, nullptr);
  fa::cuda::fill_random(v.get(), kv_elems, p.dtype, 3, nullptr);
  fa::cuda::fill_random(kn.get(), new_elems, p.dtype, 4, nullptr);
  fa::cuda::fill_random(vn.get(), new_elems, p.dtype, 5, nullptr);
  const std::vector<int> cached(batch, kCached);
  std::vector<int> table(static_cast<std::size_t>(batch) * pages_per_seq);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));  // pages in no order
  const decoding::KVCache contiguous{k.get(), v.get(), tokens, cached};
  const decoding::steps::PagedKVCache paged{k.get(), v.get(), batch * pages_per_seq, page, pages_per_seq, table, cached};
  auto step = [&] {
    if (page)
      decoding::steps::forward_with_paged_cache(p, q.get(), kn.get(), vn.get(), paged, o.get(), lse.as<float>(), {}, nullptr);
    else
      decoding::forward_with_cache(p, q.get(), kn.get(), vn.get(), contiguous, o.get(), lse.as<float>(), {}, nullptr);
  };
  step();  // warm-up
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  const double median = fa::bench::median_seconds(state, step, [&] {
    FA_CUDA_CHECK(cudaMemsetAsync(flush.get(), 0, flush.bytes(), nullptr));
  });
  state.counters["GBps"] = 2.0 * batch * kKvHeads * tokens * kD * 2 / median / 1e9;  // the K and V attended
  state.counters["ms_median"] = median * 1e3;
}

// The GPU's plain read of 2 GiB (fa::cuda::read_every_byte), the decode rows' ceiling, with the
// same L2 flush before every timed run.
void run_plain_read(benchmark::State& state) {
  constexpr std::size_t kBytes = std::size_t{2} << 30;
  fa::cuda::DeviceBuffer src(kBytes), sink(sizeof(std::uint32_t)), flush(256u << 20);
  FA_CUDA_CHECK(cudaMemset(src.get(), 1, kBytes));
  auto read = [&] { fa::cuda::read_every_byte(src.get(), kBytes, sink.as<std::uint32_t>(), nullptr); };
  read();  // warm-up
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  const double median = fa::bench::median_seconds(state, read, [&] {
    FA_CUDA_CHECK(cudaMemsetAsync(flush.get(), 0, flush.bytes(), nullptr));
  });
  state.counters["GBps"] = kBytes / median / 1e9;
  state.counters["ms_median"] = median * 1e3;
}

void register_cache_steps() {
  for (int batch : {1, 8})
    for (int page : {0, 16, 64, 256}) {
      const std::string name = "cache/10_decoding/bf16/H32x8/D128/B" + std::to_string(batch) + "/seqlen_k:16384/" +
                               (page ? "paged:" + std::to_string(page) : std::string("contiguous"));
      benchmark::RegisterBenchmark(name.c_str(), [batch, page](benchmark::State& s) { run_cache_step(s, batch, page); })
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
    benchmark::RegisterBenchmark("decode/plain_read/2GiB", run_plain_read)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.3);
    register_decode("10_decoding", decoding::forward, head_dim);
    for (const fa::Step& step : decoding::steps::all())  // the steps that take this head dim
      if (fa::supports_head_dim(step.chapter.support, head_dim))
        register_decode("10_decoding." + step.name, step.chapter.forward, head_dim);
    register_cache_steps();
  }
  return fa::bench::main(decoding::chapter(), argc, argv);
}
