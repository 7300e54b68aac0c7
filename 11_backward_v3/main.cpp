// Chapter 11's executable: 09's forward, then this chapter's backward, both checked against the
// float64 reference and timed (the runner of chapter 08).
//   ./11_backward_v3 --seqlen 4096 --head-dim 128 --dtype bf16 --causal
#include "08_backward/harness/backward_runner.h"
#include "11_backward_v3/backward_v3.h"

int main(int argc, char** argv) { return fa::run_backward_chapter(backward_v3::chapter(), argc, argv); }
