// The README's step-by-step versions on FlashAttention-2's shapes, one step per run:
//   ./09_flash_v3_steps_bench --step v2_warp_specialized --benchmark_filter='D128/full/seqlen:4096'
#include "09_flash_v3/steps/steps.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::steps_main(flash_v3::steps::all(), argc, argv); }
