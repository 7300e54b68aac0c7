// Chapter 03 on FlashAttention-2's benchmark shapes: ./03_online_softmax_bench --help
#include "03_online_softmax/online_softmax.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::main(online_softmax::chapter(), argc, argv); }
