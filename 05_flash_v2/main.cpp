// Chapter 05's executable: ./05_flash_v2 --help
#include "05_flash_v2/flash_v2.h"
#include "common/runner.h"

int main(int argc, char** argv) { return fa::run_chapter(flash_v2::chapter(), argc, argv); }
