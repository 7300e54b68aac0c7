// Chapter 04's executable: ./04_flash_v1 --help
#include "04_flash_v1/flash_v1.h"
#include "common/harness/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(flash_v1::chapter(), argc, argv); }
