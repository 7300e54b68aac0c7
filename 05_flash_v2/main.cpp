// Chapter 05's executable: f32 up to head dim 128 runs the 3xTF32 kernel (flash_v2_tf32x3.cu),
// above it and with --ffma the FFMA kernel (flash_v2.cu: the lesson).
//   ./05_flash_v2 --help
#include "05_flash_v2/flash_v2.h"
#include "common/host/cli.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) {
  // --ffma is this chapter's own flag: taken out of argv before the shared parser sees it.
  const bool ffma = fa::take_flag(argc, argv, "--ffma");
  const std::string flags = "  --ffma            the FFMA kernel (the lesson) at every head dim, not the 3xTF32\n"
                            "                    kernel up to head dim 128\n";
  return fa::run_chapter(ffma ? flash_v2::ffma_chapter() : flash_v2::chapter(), argc, argv, flags);
}
