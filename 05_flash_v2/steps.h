// The README's step-by-step versions: chapter 05's kernel with one of its changes since 04 switched
// off (template switches of flash_v2.h's Config, not copies), f32. Each is a Chapter, so the
// shared benchmark and test code run it like any chapter.
#pragma once

#include <string>
#include <vector>

#include "common/chapter.h"

namespace flash_v2::steps {

struct Step {
  std::string name;  // "no_causal_skip"
  std::string what;  // one line for the README table
  fa::Chapter chapter;
};

const std::vector<Step>& all();
const Step& find(const std::string& name);  // throws std::invalid_argument naming the known steps

}  // namespace flash_v2::steps
