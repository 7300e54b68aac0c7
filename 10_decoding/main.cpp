// Chapter 10's executable: ./10_decoding --help
#include "10_decoding/decoding.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(decoding::chapter(), argc, argv); }
