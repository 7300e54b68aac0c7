#include "common/harness/bench_harness.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/gpu_timer.h"

namespace fa::bench {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Only rows of FlashAttention-2's shapes (fa2_shape): the memory rows share their chapter, dtype, D,
// mask and seqlen at another batch and head count, and would stand in for them.
void note_row_window(const std::string& chapter, const std::string& dtype, const Problem& p, double begin,
                     double end) {
  const char* file = std::getenv("FA_BENCH_TIMES");
  if (file == nullptr || *file == '\0') return;
  const Problem fa2 = fa2_shape(p.seqlen_q, p.head_dim, p.causal, p.dtype);
  if (p.batch != fa2.batch || p.heads != fa2.heads || p.seqlen_k != fa2.seqlen_k) return;
  std::ofstream out(file, std::ios::app);
  out.precision(15);
  out << chapter << ',' << dtype << ',' << p.head_dim << ',' << (p.causal ? "causal" : "full") << ','
      << p.seqlen_q << ',' << begin << ',' << end << '\n';
}

namespace {

void run_case(benchmark::State& state, const Chapter& chapter, Problem p) {
  const std::size_t elem = dtype_size(p.dtype);
  cuda::release_workspace();
  cuda::reset_peak();
  const std::size_t base = cuda::memory_stats().current;
  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.v_elems() * elem),
      o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float));
  // Random inputs, never zeros: zeros hide wrong indexing and can run faster than real data.
  cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);
  cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
  cuda::fill_random(v.get(), p.v_elems(), p.dtype, 3, nullptr);
  auto forward = [&] { chapter.forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr); };
  try {
    forward();  // warm-up; also allocates any workspace, outside the timed loop
    FA_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const std::invalid_argument& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double begin = wall_seconds();
  const double median = median_seconds(state, forward, [] {});
  note_row_window(chapter.support.chapter, dtype_name(p.dtype), p, begin, wall_seconds());
  const std::size_t io = q.bytes() + k.bytes() + v.bytes() + o.bytes() + lse.bytes();
  const std::size_t peak = cuda::memory_stats().peak - base;
  state.counters["TFLOPS"] = forward_flops(p) / median / 1e12;
  state.counters["GBps"] = forward_min_bytes(p) / median / 1e9;
  state.counters["ms_median"] = median * 1e3;
  state.counters["peak_mem_MiB"] = peak / 1048576.0;
  state.counters["extra_mem_MiB"] = (peak - io) / 1048576.0;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
  cuda::release_workspace();
}

// FlashAttention-2's shapes: seqlen 512..max_seqlen, batch = 16k / seqlen, heads = 2048 / D.
void register_forward(const Chapter& chapter, Dtype dtype, int max_seqlen, const std::vector<int>& head_dims) {
  for (int d : head_dims) {
    if (!supports_head_dim(chapter.support, d)) continue;
    for (bool causal : {false, true}) {
      for (int seqlen = 512; seqlen <= std::min(16384, max_seqlen); seqlen *= 2) {
        Problem p = fa2_shape(seqlen, d, causal, dtype);
        p.head_dim_v = chapter.support.head_dim_v;  // a chapter or step with V's head dim of its own
        const std::string name = "fwd/" + chapter.support.chapter + "/" + dtype_name(dtype) + "/D" +
                                 std::to_string(d) + (causal ? "/causal" : "/full") + "/seqlen:" +
                                 std::to_string(seqlen);
        benchmark::RegisterBenchmark(name.c_str(), [&chapter, p](benchmark::State& s) { run_case(s, chapter, p); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3);
      }
      if (chapter.support.varlen && takes_bshd(chapter.support, dtype)) {  // the packed batch of mixed lengths
        std::vector<std::pair<std::string, Problem>> masks = {
            {causal ? "causal" : "full", varlen_shape(mixed_lengths_64k(), d, causal, dtype)}};
        if (causal && chapter.support.window)  // and its sliding-window row (bench_harness.h)
          masks.emplace_back("window" + std::to_string(kVarlenWindow),
                             varlen_shape(mixed_lengths_64k(), d, true, dtype, kVarlenWindow));
        for (const auto& [mask, problem] : masks) {
          const Problem p = problem;  // the lambda copies it (C++17 lambdas capture no structured binding)
          const std::string name = "fwd/" + chapter.support.chapter + "/" + dtype_name(dtype) + "/D" +
                                   std::to_string(d) + "/" + mask + "/varlen:64k";
          benchmark::RegisterBenchmark(name.c_str(), [&chapter, p](benchmark::State& s) { run_case(s, chapter, p); })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond)
              ->MinTime(0.3);
        }
      }
    }
  }
}


}  // namespace

Problem fa2_shape(int seqlen, int d, bool causal, Dtype dtype) {
  Problem p;
  p.batch = 16384 / seqlen;
  p.heads = p.kv_heads = 2048 / d;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = dtype;
  return p;
}

const std::vector<int>& mixed_lengths_64k() {
  static const std::vector<int> lengths = {3851, 2531, 493,  225,  765,  457,  2870, 279,  646,  1085,
                                           5245, 741,  251,  2505, 1286, 216,  5287, 7536, 3262, 5096,
                                           288,  2208, 5014, 1768, 633,  104,  526,  1240, 5371, 3757};
  return lengths;
}

Problem varlen_shape(const std::vector<int>& lengths, int d, bool causal, Dtype dtype, int window_left) {
  Problem p;
  p.batch = 1;
  p.heads = p.kv_heads = 2048 / d;
  p.head_dim = d;
  p.causal = causal;
  if (window_left >= 0) {
    p.window_left = window_left;
    p.window_right = 0;
  }
  p.dtype = dtype;
  p.layout = Layout::bshd;
  p.cu_seqlens_q = {0};
  for (int n : lengths) p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + n);
  p.cu_seqlens_k = p.cu_seqlens_q;
  p.seqlen_q = p.seqlen_k = p.cu_seqlens_q.back();
  return p;
}

std::string take_flag(int& argc, char** argv, const char* name, const std::string& fallback) {
  for (int a = 1; a + 1 < argc; ++a) {
    if (std::strcmp(argv[a], name) == 0) {
      const std::string value = argv[a + 1];
      for (int b = a; b + 2 <= argc; ++b) argv[b] = argv[b + 2];
      argc -= 2;
      return value;
    }
  }
  return fallback;
}

namespace {
int positive(const std::string& text, const char* name) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value <= 0)
    throw std::invalid_argument(std::string(name) + " takes a positive number, not '" + text + "'");
  return value;
}
}  // namespace

int take_int_flag(int& argc, char** argv, const char* name, int fallback) {
  return positive(take_flag(argc, argv, name, std::to_string(fallback)), name);
}

std::vector<int> take_ints_flag(int& argc, char** argv, const char* name, const std::string& fallback) {
  std::vector<int> values;
  std::stringstream list(take_flag(argc, argv, name, fallback));
  for (std::string v; std::getline(list, v, ',');) values.push_back(positive(v, name));
  return values;
}

int steps_main(const std::vector<Step>& steps, int argc, char** argv) {
  const std::string name = take_flag(argc, argv, "--step", "");
  if (name.empty()) {
    std::cerr << "usage: " << argv[0] << " --step NAME [benchmark flags]\n";
    for (const Step& s : steps) std::cerr << "  " << s.name << ": " << s.what << "\n";
    return 2;
  }
  try {
    return main(find_step(steps, name).chapter, argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}

int main(const Chapter& chapter, int argc, char** argv, const std::vector<const Chapter*>& also) {
  std::vector<Dtype> dtypes = chapter.support.dtypes;  // default: every dtype the chapter supports
  int max_seqlen;
  std::vector<int> head_dims;  // --head-dims 64,128 (the default): heads = 2048 / D each
  try {
    const std::string only = take_flag(argc, argv, "--dtype", "all");
    if (only != "all") dtypes = {parse_dtype(only)};
    max_seqlen = take_int_flag(argc, argv, "--max-seqlen", 16384);
    head_dims = take_ints_flag(argc, argv, "--head-dims", "64,128");
  } catch (const std::exception& e) {
    std::cerr << chapter.support.chapter << " benchmark: " << e.what() << "\n";
    return 2;
  }
  const std::string reason = cuda::unavailable_reason();
  if (!reason.empty()) {
    std::cerr << chapter.support.chapter << " benchmark: nothing to time: " << reason << "\n";
    return 0;
  }
  for (Dtype dtype : dtypes) {
    register_forward(chapter, dtype, max_seqlen, head_dims);
    for (const Chapter* other : also) register_forward(*other, dtype, max_seqlen, head_dims);
  }
  // Memory against sequence length at a fixed batch and head count (batch 1, 16 heads, D 64):
  // chapters that materialize S grow quadratically, the fused ones linearly.
  for (int seqlen = 512; seqlen <= std::min(16384, max_seqlen); seqlen *= 2) {
    Problem p;
    p.heads = p.kv_heads = 16;
    p.seqlen_q = p.seqlen_k = seqlen;
    p.head_dim = 64;
    p.dtype = dtypes.front();
    const std::string name = "mem/" + chapter.support.chapter + "/" + dtype_name(p.dtype) + "/seqlen:" +
                             std::to_string(seqlen);
    benchmark::RegisterBenchmark(name.c_str(), [&chapter, p](benchmark::State& s) { run_case(s, chapter, p); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace fa::bench
