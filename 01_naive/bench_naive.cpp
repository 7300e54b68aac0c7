// Chapter 01 on FlashAttention-2's benchmark shapes: ./01_naive_bench --help
#include "01_naive/naive.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::main(naive::chapter(), argc, argv); }
