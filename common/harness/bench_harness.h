// The shared forward benchmark (Google Benchmark, timed with CUDA events).
//
// Shapes are FlashAttention-2's: seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D,
// D = 64 and 128, causal and not. A chapter's benchmark main is one line:
//
//   int main(int argc, char** argv) { return fa::bench::main(naive::chapter(), argc, argv); }
//
// Extra flags (before Google Benchmark's own): --dtype f32|f16|bf16|all (default all the chapter
// supports), --max-seqlen N.
// Counters: TFLOPS (from the median iteration), GBps (the fewest bytes a forward must move),
// peak_mem_MiB (all device memory the run held) and extra_mem_MiB (beyond Q, K, V, O, LSE).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/harness/chapter.h"
#include "common/cuda/gpu_timer.h"

namespace fa::bench {

// A packed batch of sequences of mixed lengths (varlen, FlashAttention's cu_seqlens): 30 sequences of
// 64 to 7,536 tokens (drawn log-uniformly with a fixed seed), 65,536 in all. The benchmarks of a
// chapter whose Support takes varlen run it as "varlen:64k", heads = 2048 / D as in the other shapes;
// scripts/compare_pytorch.py times PyTorch's FlashAttention-2 varlen path on the same lengths.
// A chapter that also takes a sliding window runs the batch a third way, "window1024/varlen:64k":
// causal with a window of kVarlenWindow keys to the left (Mistral's and Gemma 2's local attention,
// window (1024, 0)), where a row sees at most 1,025 keys and whole tiles left of the window are
// skipped.
const std::vector<int>& mixed_lengths_64k();
constexpr int kVarlenWindow = 1024;
// That batch as a Problem: [1, 65536, H, D] tensors in Layout::bshd, self-attention per sequence;
// window_left >= 0 adds the window (window_left, 0) to a causal mask.
Problem varlen_shape(const std::vector<int>& lengths, int d, bool causal, Dtype dtype, int window_left = -1);

// Times `run` once per benchmark iteration with CUDA events, after `before` (untimed, earlier in
// stream order: chapter 10's L2 flush), sets each iteration's manual time and returns the median
// iteration in seconds. The benchmarks register with UseManualTime().
template <class Run, class Before>
double median_seconds(benchmark::State& state, Run&& run, Before&& before) {
  cuda::GpuTimer timer;
  std::vector<double> seconds;
  for (auto _ : state) {
    before();
    timer.start();
    run();
    const double s = timer.stop_ms() * 1e-3;
    state.SetIterationTime(s);
    seconds.push_back(s);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

// Seconds since the epoch (the system clock), the unit of note_row_window's windows.
double wall_seconds();

// With FA_BENCH_TIMES=FILE set, a forward row of FlashAttention-2's shapes appends the wall-clock
// window of its timed loop to FILE, one line "chapter,dtype,D,mask,seqlen,begin,end", so that the
// GPU's clock and power, sampled beside the run (scripts/gpu_check.sh), can be read row by row:
// under the power cap the clock, not only the kernel, decides a row's TFLOP/s (summarize.py's
// table "The GPU's clock and power during 09_flash_v3's rows and cuDNN's"). dtype names the row's
// inputs ("bf16", or "fp8" for 09's FP8 step, whose Problem says f16 for its output).
void note_row_window(const std::string& chapter, const std::string& dtype, const Problem& p, double begin,
                     double end);

// `also`: more kernels of the same chapter whose forward rows are timed with it (05's FFMA kernel,
// 05_flash_v2_ffma); their dtypes are the chapter's.
int main(const Chapter& chapter, int argc, char** argv, const std::vector<const Chapter*>& also = {});

// The main() of a chapter's steps benchmark: `--step NAME` picks one step (without it: the list
// of steps, "  name: what" per line, exit 2); the other flags are main()'s.
int steps_main(const std::vector<Step>& steps, int argc, char** argv);

// FlashAttention-2's benchmark shape at one seqlen: batch = 16k / seqlen, heads = 2048 / D, Sq = Sk.
Problem fa2_shape(int seqlen, int d, bool causal, Dtype dtype);

// Removes `name VALUE` from argv and returns VALUE (or `fallback` when absent), so that what
// is left can go to Google Benchmark; for benchmarks with flags of their own.
std::string take_flag(int& argc, char** argv, const char* name, const std::string& fallback);

// The same for a positive number (--max-seqlen) or a comma-separated list of them (--head-dims);
// throws std::invalid_argument naming the flag when a value is not one.
int take_int_flag(int& argc, char** argv, const char* name, int fallback);
std::vector<int> take_ints_flag(int& argc, char** argv, const char* name, const std::string& fallback);

}  // namespace fa::bench
