// Chapter 05 on FlashAttention-2's benchmark shapes, its FFMA kernel alone too (05_flash_v2_ffma
// rows): ./05_flash_v2_bench --help
#include "05_flash_v2/flash_v2.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) {
  return fa::bench::main(flash_v2::chapter(), argc, argv, {&flash_v2::ffma_chapter()});
}
