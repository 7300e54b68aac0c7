// Chapter 09's executable: ./09_flash_v3 --help
#include "09_flash_v3/flash_v3.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(flash_v3::chapter(), argc, argv); }
