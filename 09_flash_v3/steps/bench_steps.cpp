// The README's step-by-step versions on FlashAttention-2's shapes, one step per run:
//   ./09_flash_v3_steps_bench --step v2_warp_specialized --benchmark_filter='D128/full/seqlen:4096'
//   ./09_flash_v3_steps_bench --step v6_fp8 --benchmark_filter='causal'
// v6_fp8 takes E4M3 inputs through an entry point of its own (steps/fp8.h): its rows are
// fwd/09_flash_v3.v6_fp8/fp8/D128/<full|causal>/seqlen:<n>, D = 128 only, FLOPs counted as the
// other rows' (common/host/problem.cpp: forward_flops), V's transpose inside the timed call.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "09_flash_v3/steps/fp8.h"
#include "09_flash_v3/steps/steps.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/harness/bench_harness.h"

namespace {

constexpr const char* kFp8Step = "v6_fp8";
constexpr const char* kFp8What =
    "E4M3 Q, K, V with per-tensor scales on v4's turns: FP8 wgmma, V transposed, P in E4M3";

void run_fp8(benchmark::State& state, const fa::Problem& p) {
  using fa::cuda::DeviceBuffer;
  DeviceBuffer q(p.q_elems()), k(p.kv_elems()), v(p.kv_elems()), o(p.o_elems() * 2), lse(p.lse_elems() * sizeof(float));
  fa::cuda::fill_random_e4m3(q.get(), p.q_elems(), 1, nullptr);
  fa::cuda::fill_random_e4m3(k.get(), p.kv_elems(), 2, nullptr);
  fa::cuda::fill_random_e4m3(v.get(), p.kv_elems(), 3, nullptr);
  auto forward = [&] {
    flash_v3::steps::forward_fp8(p, q.get(), k.get(), v.get(), {}, o.get(), lse.as<float>(), nullptr);
  };
  try {
    forward();  // warm-up; also allocates the workspace (V^T), outside the timed loop
    FA_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const std::invalid_argument& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double begin = fa::bench::wall_seconds();
  const double median = fa::bench::median_seconds(state, forward, [] {});
  fa::bench::note_row_window(std::string("09_flash_v3.") + kFp8Step, "fp8", p, begin, fa::bench::wall_seconds());
  state.counters["TFLOPS"] = fa::forward_flops(p) / median / 1e12;
  state.counters["ms_median"] = median * 1e3;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
  fa::cuda::release_workspace();
}

int fp8_main(int argc, char** argv) {
  int max_seqlen = 16384;
  std::vector<int> head_dims;
  try {
    fa::bench::take_flag(argc, argv, "--dtype", "all");  // the inputs are E4M3 whatever it says
    max_seqlen = fa::bench::take_int_flag(argc, argv, "--max-seqlen", 16384);
    head_dims = fa::bench::take_ints_flag(argc, argv, "--head-dims", "128");
  } catch (const std::exception& e) {
    std::cerr << "09_flash_v3.v6_fp8 benchmark: " << e.what() << "\n";
    return 2;
  }
  const std::string reason = fa::unavailable_reason(flash_v3::steps::fp8_support());
  if (!reason.empty()) {
    std::cerr << "09_flash_v3.v6_fp8 benchmark: nothing to time: " << reason << "\n";
    return 0;
  }
  if (std::find(head_dims.begin(), head_dims.end(), 128) != head_dims.end())
    for (bool causal : {false, true})
      for (int seqlen = 512; seqlen <= std::min(16384, max_seqlen); seqlen *= 2) {
        const fa::Problem p = fa::bench::fa2_shape(seqlen, 128, causal, fa::Dtype::f16);
        const std::string name = std::string("fwd/09_flash_v3.") + kFp8Step + "/fp8/D128/" +
                                 (causal ? "causal" : "full") + "/seqlen:" + std::to_string(seqlen);
        benchmark::RegisterBenchmark(name.c_str(), [p](benchmark::State& s) { run_fp8(s, p); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.3);
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string step;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--step") step = argv[i + 1];
  if (step == kFp8Step) {
    fa::bench::take_flag(argc, argv, "--step", "");
    return fp8_main(argc, argv);
  }
  const int rc = fa::bench::steps_main(flash_v3::steps::all(), argc, argv);
  if (step.empty()) std::cerr << "  " << kFp8Step << ": " << kFp8What << "\n";  // the list steps_main printed
  return rc;
}
