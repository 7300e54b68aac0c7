// Chapter 06's executable: ./06_tensor_core --help
#include "06_tensor_core/tensor_core.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(tensor_core::chapter(), argc, argv); }
