// Chapter 06 on FlashAttention-2's benchmark shapes: ./06_tensor_core_bench --dtype bf16 --help
#include "06_tensor_core/tensor_core.h"
#include "common/harness/bench_harness.h"

int main(int argc, char** argv) { return fa::bench::main(tensor_core::chapter(), argc, argv); }
