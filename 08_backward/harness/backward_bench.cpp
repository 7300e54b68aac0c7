#include "08_backward/harness/backward_bench.h"

#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda/cuda_check.h"
#include "common/harness/bench_harness.h"  // median_seconds, fa2_shape, take_flag

namespace fa::backward_bench {

Tensors::Tensors(const Problem& p)
    : q(p.q_elems() * dtype_size(p.dtype)), k(p.kv_elems() * dtype_size(p.dtype)),
      v(p.kv_elems() * dtype_size(p.dtype)), o(p.o_elems() * dtype_size(p.dtype)), lse(p.lse_elems() * sizeof(float)),
      dout(p.o_elems() * dtype_size(p.dtype)), dq(p.q_elems() * dtype_size(p.dtype)),
      dk(p.kv_elems() * dtype_size(p.dtype)), dv(p.kv_elems() * dtype_size(p.dtype)) {
  // Random inputs, never zeros: zeros hide wrong indexing and can run faster than real data.
  cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);
  cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
  cuda::fill_random(v.get(), p.kv_elems(), p.dtype, 3, nullptr);
  cuda::fill_random(dout.get(), p.o_elems(), p.dtype, 4, nullptr);
}

std::size_t Tensors::bytes() const {
  std::size_t io = 0;
  for (const cuda::DeviceBuffer* b : {&q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv}) io += b->bytes();
  return io;
}

void run_case(benchmark::State& state, const Problem& p, double flops, const Launch& forward, const Launch& backward) {
  cuda::release_workspace();
  cuda::reset_peak();
  const std::size_t base = cuda::memory_stats().current;
  Tensors t(p);
  try {
    forward(t);
    backward(t);  // warm-up; also allocates the workspace, outside the timed loop
    FA_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const std::invalid_argument& e) {
    state.SkipWithError(e.what());
    return;
  }
  // Each timed call follows an untimed one in stream order: the host prepares the timed call (its
  // memset, tensor maps and launches) while the GPU runs the untimed one, so the events time the
  // GPU's work, as in a training step where the host runs ahead. scripts/compare_pytorch.py times
  // PyTorch's backward the same way, where the host's share is larger (autograd, cuDNN's graph).
  const double median = bench::median_seconds(state, [&] { backward(t); }, [&] { backward(t); });
  state.counters["TFLOPS"] = flops / median / 1e12;
  state.counters["ms_median"] = median * 1e3;
  state.counters["extra_mem_MiB"] = (cuda::memory_stats().peak - base - t.bytes()) / 1048576.0;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
  cuda::release_workspace();
}

void register_case(const std::string& name, const Problem& p, double flops, Launch forward, Launch backward,
                   std::function<void(benchmark::State&)> extra) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [=](benchmark::State& s) {
                                 run_case(s, p, flops, forward, backward);
                                 if (extra) extra(s);
                               })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.3);
}

void register_dense(const std::string& label, Dtype dtype, BackwardFn backward, const BackwardChapter& pair,
                    const std::vector<int>& head_dims, int max_seqlen, int group, Layout layout) {
  const bool bshd = layout == Layout::bshd;
  if (bshd && !takes_bshd(pair.support, dtype)) {
    std::cerr << label << ": --layout bshd: " << pair.support.chapter << " takes no [B, S, H, D] tensors in "
              << dtype_name(dtype) << "; no rows\n";
    return;
  }
  const BackwardChapter* forward_of = &pair;
  for (int d : head_dims) {
    if (!supports_head_dim(pair.support, d)) continue;
    for (bool causal : {false, true}) {
      const std::string mask = causal ? "causal/" : "full/";
      std::vector<std::pair<std::string, Problem>> shapes;  // "<mask>/<shape>", the problem
      for (int seqlen = 512; seqlen <= std::min(16384, max_seqlen); seqlen *= 2)
        shapes.emplace_back(mask + "seqlen:" + std::to_string(seqlen), bench::fa2_shape(seqlen, d, causal, dtype));
      // The packed batch of mixed lengths (bench_harness.h), where the backward takes one, and its
      // sliding-window row where the backward takes a window too.
      if (!bshd && pair.support.varlen && takes_bshd(pair.support, dtype)) {
        shapes.emplace_back(mask + "varlen:64k", bench::varlen_shape(bench::mixed_lengths_64k(), d, causal, dtype));
        if (causal && pair.support.window)
          shapes.emplace_back("window" + std::to_string(bench::kVarlenWindow) + "/varlen:64k",
                              bench::varlen_shape(bench::mixed_lengths_64k(), d, true, dtype, bench::kVarlenWindow));
      }
      for (const auto& [shape, problem] : shapes) {
        Problem p = problem;  // the lambdas below copy it (C++17 lambdas capture no structured binding)
        p.kv_heads = p.heads / group;
        if (bshd) p.layout = Layout::bshd;
        const std::string name = "bwd/" + label + "/" + dtype_name(dtype) + "/D" + std::to_string(d) + "/" + shape +
                                 (bshd ? "/layout:bshd" : "") + (group > 1 ? "/group:" + std::to_string(group) : "");
        register_case(
            name, p, backward_flops(p),
            [forward_of, p](Tensors& t) {
              forward_of->forward(p, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), nullptr);
            },
            [backward, p](Tensors& t) {
              backward(p, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), t.dout.get(), t.dq.get(),
                       t.dk.get(), t.dv.get(), nullptr);
            });
      }
    }
  }
}

int main(const Support& support, int argc, char** argv, const std::function<void(const Flags&)>& register_rows) {
  Flags flags;
  try {
    flags.max_seqlen = bench::take_int_flag(argc, argv, "--max-seqlen", 16384);
    flags.head_dims = bench::take_ints_flag(argc, argv, "--head-dims", "64,128");
    flags.group = bench::take_int_flag(argc, argv, "--group", 1);
    const std::string layout = bench::take_flag(argc, argv, "--layout", "bhsd");
    if (layout != "bhsd" && layout != "bshd") throw std::invalid_argument("--layout: bhsd or bshd, not '" + layout + "'");
    flags.layout = layout == "bshd" ? Layout::bshd : Layout::bhsd;
    for (int d : flags.head_dims)
      if ((2048 / d) % flags.group != 0)
        throw std::invalid_argument("--group " + std::to_string(flags.group) + " does not divide " +
                                    std::to_string(2048 / d) + " heads (head dim " + std::to_string(d) + ")");
  } catch (const std::exception& e) {
    std::cerr << support.chapter << " benchmark: " << e.what() << "\n";
    return 2;
  }
  const std::string reason = unavailable_reason(support);
  if (!reason.empty()) {
    std::cerr << support.chapter << " benchmark: nothing to time: " << reason << "\n";
    return 0;
  }
  register_rows(flags);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace fa::backward_bench
