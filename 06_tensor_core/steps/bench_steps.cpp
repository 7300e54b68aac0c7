// The README's step-by-step versions on FlashAttention-2's shapes, one step per run:
//   ./06_tensor_core_steps_bench --step v2_swizzle --benchmark_filter='D128/full/seqlen:4096'
#include "06_tensor_core/steps/steps.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::steps_main(tensor_core::steps::all(), argc, argv); }
