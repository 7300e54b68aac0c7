// Chapter 08's executable: the forward (05_flash_v2), then the backward, both checked and timed.
//   ./08_backward --help
#include "08_backward/backward.h"
#include "common/backward_runner.h"

int main(int argc, char** argv) { return fa::run_backward_chapter(backward::chapter(), argc, argv); }
