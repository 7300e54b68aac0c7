// The README's step-by-step versions on FlashAttention-2's shapes, one step per run:
//   ./05_flash_v2_steps_bench --step expf --benchmark_filter='D128/full/seqlen:4096'
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "05_flash_v2/steps.h"
#include "common/bench_harness.h"

int main(int argc, char** argv) {
  for (int a = 1; a + 1 < argc; ++a) {
    if (std::strcmp(argv[a], "--step") != 0) continue;
    try {
      const flash_v2::steps::Step& step = flash_v2::steps::find(argv[a + 1]);
      for (int b = a; b + 2 <= argc; ++b) argv[b] = argv[b + 2];  // the rest is the harness's
      return fa::bench::main(step.chapter, argc - 2, argv);
    } catch (const std::invalid_argument& e) {
      std::cerr << e.what() << "\n";
      return 2;
    }
  }
  std::cerr << "usage: " << argv[0] << " --step NAME [benchmark flags]\n";
  for (const auto& s : flash_v2::steps::all()) std::cerr << "  " << s.name << ": " << s.what << "\n";
  return 2;
}
