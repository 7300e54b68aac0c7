// Chapter 03's executable: ./03_online_softmax --help
#include "03_online_softmax/online_softmax.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(online_softmax::chapter(), argc, argv); }
