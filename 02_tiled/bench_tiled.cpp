// Chapter 02 on FlashAttention-2's benchmark shapes: ./02_tiled_bench --help
#include "02_tiled/tiled.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::main(tiled::chapter(), argc, argv); }
