// The README's step-by-step versions on FlashAttention-2's shapes, one step per run:
//   ./05_flash_v2_steps_bench --step expf --benchmark_filter='D128/full/seqlen:4096'
#include "05_flash_v2/steps/steps.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::steps_main(flash_v2::steps::all(), argc, argv); }
