// Chapter 08's executable: the forward, then the backward, both checked and timed. f32 up to head
// dim 128 runs the 3xTF32 pair (05's flash_v2_tf32x3.cu, backward_tf32x3.cu), above it and with --ffma
// the FFMA pair (05's chapter kernel, backward.cu: the lesson); f16/bf16 06's forward and the
// tensor-core backward. Its head dims depend on the dtype: f32 takes any up to 256, the
// tensor-core backward multiples of 8 up to 256; --help lists both tables.
//   ./08_backward --help
#include <string>
#include <vector>

#include "08_backward/backward.h"
#include "08_backward/harness/backward_runner.h"
#include "common/host/cli.h"

int main(int argc, char** argv) {
  // --ffma is this chapter's own flag: taken out of argv before the shared parser sees it.
  const bool ffma = fa::take_flag(argc, argv, "--ffma");
  const std::string flags = "  --ffma            f32 through the FFMA kernels (05's and this chapter's, the lesson) at\n"
                            "                    every head dim, not the 3xTF32 pair up to head dim 128\n";
  if (ffma) return fa::run_backward_chapter(backward::fp32_chapter(), argc, argv, {}, flags);
  // A problem is checked against its dtype's table: the fp32 kernels' or the tensor-core one's.
  const std::vector<fa::Support> tables = {backward::fp32_chapter().support, backward::tensor_core_support()};
  return fa::run_backward_chapter(backward::chapter(), argc, argv, tables, flags);
}
