// Chapter 04 on FlashAttention-2's benchmark shapes: ./04_flash_v1_bench --help
#include "04_flash_v1/flash_v1.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::main(flash_v1::chapter(), argc, argv); }
