// Chapter 02's executable: ./02_tiled --help
#include "02_tiled/tiled.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(tiled::chapter(), argc, argv); }
