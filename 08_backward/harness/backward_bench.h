// The benchmark pieces every backward chapter's bench shares (08's and 11's): the tensors of one
// problem (random, never zeros), one timed case (CUDA events, the median iteration), the dense
// rows on FlashAttention-2's benchmark shapes, and the flags --max-seqlen and --head-dims.
// Counters of a row: TFLOPS (fa::backward_flops over the median iteration), ms_median,
// extra_mem_MiB (device memory beyond the tensors: the chapter's workspace), seqlen, head_dim,
// causal. Only the backward is timed; O and LSE come from one forward run before the loop.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "08_backward/harness/backward.h"
#include "common/cuda/device_memory.h"

namespace fa::backward_bench {

struct Tensors {
  cuda::DeviceBuffer q, k, v, o, lse, dout, dq, dk, dv;
  explicit Tensors(const Problem& p);
  std::size_t bytes() const;
};
using Launch = std::function<void(Tensors&)>;

// Times `backward` (after one `forward` for O and LSE and one warm-up) with CUDA events.
void run_case(benchmark::State& state, const Problem& p, double flops, const Launch& forward, const Launch& backward);

// Registers run_case as a manually timed benchmark `name`; `extra` runs after it (counters, cleanup).
void register_case(const std::string& name, const Problem& p, double flops, Launch forward, Launch backward,
                   std::function<void(benchmark::State&)> extra = {});

// The rows bwd/<label>/<dtype>/D<d>/{full,causal}/seqlen:<512 .. max_seqlen> (FlashAttention-2's
// shapes, bench::fa2_shape) of `backward`, with
// `pair`'s forward for O and LSE, at the head dims of `head_dims` that `pair` supports. group > 1:
// GQA, `group` query heads a KV head (Hkv = H / group), the rows named .../seqlen:<n>/group:<g>.
// layout bshd: Q, K, V, O and the gradients as [B, S, H, D] (a transformers model's tensors), the
// rows .../seqlen:<n>/layout:bshd, where `pair` takes that layout in `dtype` (else none).
void register_dense(const std::string& label, Dtype dtype, BackwardFn backward, const BackwardChapter& pair,
                    const std::vector<int>& head_dims, int max_seqlen, int group = 1, Layout layout = Layout::bhsd);

// The flags of a backward benchmark: --max-seqlen N (default 16384), --head-dims 64,128 (the
// default), --group G (query heads a KV head in the dense rows, default 1; a divisor of every head
// count, 2048 / D), --layout bhsd|bshd (the dense rows' tensors, default bhsd).
struct Flags {
  int max_seqlen;
  std::vector<int> head_dims;
  int group = 1;
  Layout layout = Layout::bhsd;
};

// The main() of a backward chapter's benchmark: takes the flags out of argv (exit 2, naming the
// flag, for a bad one); where no GPU, or none of the chapter's min_compute_capability, is present,
// says so (exit 0); else registers the rows with `register_rows` and runs Google Benchmark.
int main(const Support& support, int argc, char** argv, const std::function<void(const Flags&)>& register_rows);

}  // namespace fa::backward_bench
