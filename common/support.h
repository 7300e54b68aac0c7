// What a chapter supports: the table its forward() refuses problems by (check_forward_args in
// chapter.h) and its executable's --help lists (cli.h). Plain C++, so the CPU tests see it.
#pragma once

#include <string>
#include <vector>

#include "common/problem.h"

namespace fa {

// What a chapter supports; its forward() checks its arguments against this.
struct Support {
  std::string chapter;            // "01_naive"
  std::vector<Dtype> dtypes;      // {Dtype::f32}
  std::vector<int> head_dims;     // exact list, or empty for "any head_dim up to max_head_dim"
  int max_head_dim = 0;
};

}  // namespace fa
