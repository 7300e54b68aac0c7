// Chapter 12's executable: the ring's forward, then its backward, both checked against the float64
// reference and timed (chapter 08's backward runner). The ring comes from the environment:
//   FA_RING_RANKS=4 ./12_ring_attention --seqlen 8192 --head-dim 128 --dtype bf16 --causal
//   FA_RING_RANKS=4 FA_RING_TRANSPORT=copy ./12_ring_attention   (four simulated ranks on one GPU)
#include "08_backward/harness/backward_runner.h"
#include "12_ring_attention/ring.h"

int main(int argc, char** argv) {
  return fa::run_backward_chapter(
      ring_attention::backward_chapter(), argc, argv, {},
      "  environment FA_RING_RANKS=R   ranks of the ring, 1 to 8 (default: the visible GPUs); seqlen must be a\n"
      "                                multiple of 2R * 128\n"
      "  environment FA_RING_TRANSPORT=nccl|copy   nccl: a GPU a rank; copy: simulated ranks on one GPU\n"
      "                                (default: nccl when there are >= R GPUs, else copy)\n");
}
