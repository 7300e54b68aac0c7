// Chapter 08's backward on FlashAttention-2's benchmark shapes (Google Benchmark, CUDA events):
//   ./08_backward_bench [--max-seqlen N] [Google Benchmark flags]
// seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D, D = 64 and 128, causal and not;
// f32 (CUDA cores), bf16 and f16 (tensor cores), and bf16 in the deterministic mode
// (bwd/08_backward_deterministic/bf16/..., a column of its own in scripts/summarize.py).
// One dtype: --benchmark_filter=/bf16/
// The block-sparse backward: bwd_sparse/08_backward/bf16/D128/blockk128/random/density:0.50/
// seqlen:16384 -- random 128 x 128 block masks at densities 1, 0.5, 0.25, 0.1, seqlen 4k and 16k,
// non-causal; TFLOPS over the active blocks' FLOPs (2.5 x block_sparse::forward_flops), `density`
// the mask's exact one. scripts/plot_sparse.py draws the speed-up against density.
// Only the backward is timed (the preprocessing kernel included); O and LSE come from one forward
// run before the loop. Counters: TFLOPS (fa::backward_flops over the median iteration),
// ms_median, extra_mem_MiB (device memory beyond the tensors: the D_i workspace).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "07_block_sparse/block_sparse.h"
#include "08_backward/backward.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/gpu_timer.h"

namespace {

namespace bs = block_sparse;
namespace cuda = fa::cuda;

struct Tensors {
  cuda::DeviceBuffer q, k, v, o, lse, dout, dq, dk, dv;
  explicit Tensors(const fa::Problem& p)
      : q(p.q_elems() * fa::dtype_size(p.dtype)), k(p.kv_elems() * fa::dtype_size(p.dtype)),
        v(p.kv_elems() * fa::dtype_size(p.dtype)), o(p.o_elems() * fa::dtype_size(p.dtype)),
        lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * fa::dtype_size(p.dtype)),
        dq(p.q_elems() * fa::dtype_size(p.dtype)), dk(p.kv_elems() * fa::dtype_size(p.dtype)),
        dv(p.kv_elems() * fa::dtype_size(p.dtype)) {
    // Random inputs, never zeros: zeros hide wrong indexing and can run faster than real data.
    cuda::fill_random(q.get(), p.q_elems(), p.dtype, 1, nullptr);
    cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 2, nullptr);
    cuda::fill_random(v.get(), p.kv_elems(), p.dtype, 3, nullptr);
    cuda::fill_random(dout.get(), p.o_elems(), p.dtype, 4, nullptr);
  }
  std::size_t bytes() const {
    std::size_t io = 0;
    for (const cuda::DeviceBuffer* b : {&q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv}) io += b->bytes();
    return io;
  }
};
using Launch = std::function<void(Tensors&)>;

// Times `backward` (after one `forward` for O and LSE and one warm-up) with CUDA events.
void run_case(benchmark::State& state, const fa::Problem& p, double flops, const Launch& forward,
              const Launch& backward) {
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
  cuda::GpuTimer timer;
  std::vector<double> seconds;
  for (auto _ : state) {
    timer.start();
    backward(t);
    const double s = timer.stop_ms() * 1e-3;
    state.SetIterationTime(s);
    seconds.push_back(s);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  const double median = seconds[seconds.size() / 2];
  state.counters["TFLOPS"] = flops / median / 1e12;
  state.counters["ms_median"] = median * 1e3;
  state.counters["extra_mem_MiB"] = (cuda::memory_stats().peak - base - t.bytes()) / 1048576.0;
  state.counters["seqlen"] = p.seqlen_q;
  state.counters["head_dim"] = p.head_dim;
  state.counters["causal"] = p.causal;
  cuda::release_workspace();
}

void register_case(const std::string& name, const fa::Problem& p, double flops, Launch forward, Launch backward,
                   std::function<void(benchmark::State&)> extra = {}) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [=](benchmark::State& s) {
                                 run_case(s, p, flops, forward, backward);
                                 if (extra) extra(s);
                               })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.3);
}

fa::Problem fa2_shape(int seqlen, int d, bool causal, fa::Dtype dtype) {
  fa::Problem p;
  p.batch = 16384 / seqlen;
  p.heads = p.kv_heads = 2048 / d;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = dtype;
  return p;
}

// The block-sparse backward against density: random 128 x 128 block masks, bf16, non-causal.
void register_sparse(int max_seqlen) {
  for (int d : {64, 128}) {
    for (int seqlen : {4096, 16384}) {
      if (seqlen > max_seqlen) continue;
      const fa::Problem p = fa2_shape(seqlen, d, false, fa::Dtype::bf16);
      for (double density : {1.0, 0.5, 0.25, 0.1}) {
        const bs::BlockMask mask =
            bs::make_mask(p, 128, {{.pattern = bs::Pattern::random, .density = density, .seed = 42}});
        // The device-side masks are built before the timed loop (with the forward) and freed
        // after it (with the counters), so no device memory outlives its case.
        auto forward_mask = std::make_shared<std::unique_ptr<bs::DeviceBlockMask>>();
        auto walk = std::make_shared<std::unique_ptr<backward::DeviceSparseWalk>>();
        char name[160];
        std::snprintf(name, sizeof name, "bwd_sparse/08_backward/bf16/D%d/blockk128/random/density:%.2f/seqlen:%d", d,
                      density, seqlen);
        const double exact = mask.density();
        register_case(
            name, p, 2.5 * bs::forward_flops(p, mask),
            [=](Tensors& t) {
              *forward_mask = std::make_unique<bs::DeviceBlockMask>(mask);
              *walk = std::make_unique<backward::DeviceSparseWalk>(p, mask);
              bs::forward(p, **forward_mask, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), nullptr);
            },
            [=](Tensors& t) {
              backward::backward(p, **walk, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(),
                                 t.dout.get(), t.dq.get(), t.dk.get(), t.dv.get(), nullptr);
            },
            [=](benchmark::State& s) {
              s.counters["density"] = exact;
              forward_mask->reset();
              walk->reset();
            });
      }
    }
  }
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
  std::vector<int> head_dims = {64, 128};  // --head-dims 64,96,128: heads = 2048 / D each
  for (int a = 1; a + 1 < argc; ++a) {
    if (std::strcmp(argv[a], "--head-dims") == 0) {
      head_dims.clear();
      std::stringstream dims(argv[a + 1]);
      for (std::string d; std::getline(dims, d, ',');) head_dims.push_back(std::atoi(d.c_str()));
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
    const fa::BackwardChapter* pair;  // its forward, and the head dims it takes
  };
  const std::string& name = chapter.support.chapter;
  // f32: the chapter's pair (3xTF32 up to D = 128, backward.h: fp32_on_tensor_cores) and the FFMA
  // kernels alone, the lesson (05's chapter kernel as the forward).
  const fa::BackwardChapter& ffma = backward::fp32_chapter();
  const Variant variants[] = {{fa::Dtype::f32, chapter.backward, name, &chapter},
                              {fa::Dtype::f32, ffma.backward, name + "_ffma", &ffma},
                              {fa::Dtype::bf16, chapter.backward, name, &chapter},
                              {fa::Dtype::f16, chapter.backward, name, &chapter},
                              {fa::Dtype::bf16, chapter.deterministic, name + "_deterministic", &chapter}};
  for (const Variant& variant : variants) {
    const fa::BackwardChapter& pair = *variant.pair;
    for (int d : head_dims) {
      if (variant.dtype != fa::Dtype::f32 && !fa::supports_head_dim(backward::tensor_core_support(), d)) continue;
      if (!fa::supports_head_dim(pair.support, d)) continue;
      for (bool causal : {false, true}) {
        for (int seqlen = 512; seqlen <= std::min(16384, max_seqlen); seqlen *= 2) {
          const fa::Problem p = fa2_shape(seqlen, d, causal, variant.dtype);
          const std::string bench = "bwd/" + variant.chapter + "/" + fa::dtype_name(variant.dtype) + "/D" + std::to_string(d) +
                                    (causal ? "/causal" : "/full") + "/seqlen:" + std::to_string(seqlen);
          const fa::BackwardFn backward_fn = variant.backward;
          register_case(
              bench, p, fa::backward_flops(p),
              [&pair, p](Tensors& t) {
                pair.forward(p, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), nullptr);
              },
              [backward_fn, p](Tensors& t) {
                backward_fn(p, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), t.dout.get(), t.dq.get(),
                            t.dk.get(), t.dv.get(), nullptr);
              });
        }
      }
    }
  }
  register_sparse(max_seqlen);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
