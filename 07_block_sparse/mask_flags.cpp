#include "07_block_sparse/mask_flags.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace block_sparse {
namespace {

// Which patterns read each parameter (block_mask.h's generators).
struct Parameter {
  const char* flag;
  std::vector<Pattern> used_by;
};
const Parameter kParameters[] = {
    {.flag = "--density", .used_by = {Pattern::random}},
    {.flag = "--mask-seed", .used_by = {Pattern::random}},
    {.flag = "--window", .used_by = {Pattern::local, Pattern::streaming}},
    {.flag = "--sink", .used_by = {Pattern::streaming}},
};

// Refuses a parameter flag that `pattern` does not use.
void check_used(const std::string& flag, Pattern pattern) {
  for (const Parameter& param : kParameters) {
    if (flag != param.flag) continue;
    if (std::find(param.used_by.begin(), param.used_by.end(), pattern) != param.used_by.end()) return;
    std::string users;
    for (std::size_t i = 0; i < param.used_by.size(); ++i)
      users += std::string(i == 0 ? "" : " or ") + pattern_name(param.used_by[i]);
    throw std::invalid_argument(flag + " does not apply to --pattern " + pattern_name(pattern) + " (only to " +
                                users + ")");
  }
}

}  // namespace

const char* const kMaskFlagsHelp =
    "  --pattern P       dense, random, local, streaming or causal (default random)\n"
    "  --density X       random: fraction of key blocks each query block keeps (default 0.5)\n"
    "  --block-k N       key block size, 64 or 128 (query blocks are 128 rows) (default 128)\n"
    "  --window N        local, streaming: key blocks beyond the diagonal blocks (default 1)\n"
    "  --sink N          streaming: leading key blocks every query block sees (default 1)\n"
    "  --mask-seed N     random: the mask's seed (default 0)\n"
    "  A parameter the pattern does not use is refused, not ignored.\n";

MaskOptions take_mask_flags(int& argc, char** argv) {
  MaskOptions m;
  std::vector<std::string> given;  // the parameter flags, checked against the pattern at the end
  int kept = 1;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    const bool ours = flag == "--pattern" || flag == "--density" || flag == "--block-k" || flag == "--window" ||
                      flag == "--sink" || flag == "--mask-seed";
    if (!ours) {
      argv[kept++] = argv[a];
      continue;
    }
    if (a + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++a];
    if (flag == "--pattern") {
      m.pattern.pattern = parse_pattern(value);  // names the known patterns if wrong
      continue;
    }
    if (flag != "--block-k") given.push_back(flag);
    std::size_t used = 0;
    try {
      if (flag == "--density") m.pattern.density = std::stod(value, &used);
      else if (flag == "--block-k") m.block_k = std::stoi(value, &used);
      else if (flag == "--window") m.pattern.window = std::stoi(value, &used);
      else if (flag == "--sink") m.pattern.sink = std::stoi(value, &used);
      else if (value.find('-') == std::string::npos) m.pattern.seed = std::stoull(value, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (value.empty() || used != value.size()) throw std::invalid_argument(flag + ": bad value '" + value + "'");
  }
  for (const std::string& flag : given) check_used(flag, m.pattern.pattern);
  argc = kept;
  argv[argc] = nullptr;
  return m;
}

}  // namespace block_sparse
