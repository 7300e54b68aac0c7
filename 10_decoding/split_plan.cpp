#include "10_decoding/split_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/device/tiles.h"  // ceil_div

namespace decoding {
using fa::cuda::ceil_div;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double wave_efficiency(std::int64_t ctas, int slots) {
  const double waves = static_cast<double>(ctas) / slots;
  return waves / std::ceil(waves);
}

}  // namespace

SplitPlan plan_splits(std::int64_t tiles, int key_blocks, int slots, int max_splits) {
  if (tiles < 1 || key_blocks < 0 || slots < 1 || max_splits < 1)
    throw std::invalid_argument("plan_splits: needs tiles >= 1, key_blocks >= 0, slots >= 1, max_splits >= 1; got " +
                                std::to_string(tiles) + ", " + std::to_string(key_blocks) + ", " + std::to_string(slots) +
                                ", " + std::to_string(max_splits));
  // BEGIN SOLUTION: split_plan.h's one-wave rule: split the key range only when the unsplit grid fills less than 80% of one wave's slots, into as many equal pieces as one wave holds, and report the busy share of that wave, wave_efficiency(tiles x splits, slots) (README: The split plan)
  // STUB: const int splits = key_blocks > 1 ? 2 : 1;  // not the rule: two pieces, so that the kernels' combine runs
  // STUB: return {.splits = splits, .blocks_per_split = ceil_div(key_blocks, splits), .efficiency = wave_efficiency(tiles * splits, slots)};
  SplitPlan plan{.splits = 1, .blocks_per_split = key_blocks, .efficiency = wave_efficiency(tiles, slots)};
  if (key_blocks <= 1 || tiles >= 0.8 * slots) return plan;
  const std::int64_t fit = slots / tiles;  // pieces per tile that one wave holds (>= 1: tiles < slots)
  const int most = static_cast<int>(std::min<std::int64_t>({max_splits, key_blocks, fit}));
  plan.blocks_per_split = ceil_div(key_blocks, most);         // the shortest pieces one wave allows
  plan.splits = ceil_div(key_blocks, plan.blocks_per_split);  // as few as that length needs: none empty
  plan.efficiency = wave_efficiency(tiles * plan.splits, slots);
  return plan;
  // END SOLUTION
}

void combine_row(const std::vector<double>& o_parts, const std::vector<double>& lse_parts, int head_dim,
                 double sink, std::vector<double>& o, double& lse) {
  const std::size_t splits = lse_parts.size();
  if (head_dim < 1 || o_parts.size() != splits * head_dim)
    throw std::invalid_argument("combine_row: o_parts must hold one row of head_dim values per split");
  // BEGIN SOLUTION: split_plan.h's merge: the pieces' O_s and LSE_s (and the sink's logit, once) into the row's O and LSE, safe against overflow and against pieces that saw no key (README: The split plan)
  // STUB: o.assign(head_dim, 0.0);  // the stub merges nothing: O = 0 and LSE = +inf
  // STUB: lse = kInf;
  auto weighs = [](double l) { return l != kInf && l != -kInf; };  // +inf: the split saw no key
  double m = sink;  // -inf without a sink
  for (double l : lse_parts)
    if (weighs(l)) m = std::max(m, l);
  o.assign(head_dim, 0.0);
  if (m == -kInf) {  // no key anywhere and no sink
    lse = kInf;
    return;
  }
  double total = sink == -kInf ? 0.0 : std::exp(sink - m);
  for (std::size_t s = 0; s < splits; ++s) {
    if (!weighs(lse_parts[s])) continue;
    const double w = std::exp(lse_parts[s] - m);  // <= 1: m is the largest
    total += w;
    for (int d = 0; d < head_dim; ++d) o[d] += w * o_parts[s * head_dim + d];
  }
  for (double& x : o) x /= total;
  lse = m + std::log(total);
  // END SOLUTION
}

}  // namespace decoding
