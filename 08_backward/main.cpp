// Chapter 08's executable: the forward (05_flash_v2 for f32, 06_tensor_core for f16/bf16), then
// the backward, both checked and timed. Its head dims depend on the dtype: the fp32 kernel takes
// any up to 256, the tensor-core one 64 and 128; --help lists both tables.
//   ./08_backward --help
#include <vector>

#include "08_backward/backward.h"
#include "common/backward_runner.h"

int main(int argc, char** argv) {
  // A problem is checked against its dtype's kernel: the fp32 kernel's table or the tensor-core one's.
  const std::vector<fa::Support> tables = {backward::fp32_chapter().support, backward::tensor_core_support()};
  return fa::run_backward_chapter(backward::chapter(), argc, argv, tables);
}
