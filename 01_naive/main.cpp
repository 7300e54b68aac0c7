// Chapter 01's executable: ./01_naive --help
#include "01_naive/naive.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(naive::chapter(), argc, argv); }
