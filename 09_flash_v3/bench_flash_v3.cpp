// Chapter 09 on FlashAttention-2's benchmark shapes: ./09_flash_v3_bench --dtype bf16 --help
#include "09_flash_v3/flash_v3.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::main(flash_v3::chapter(), argc, argv); }
