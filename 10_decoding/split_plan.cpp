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
  SplitPlan plan{.splits = 1, .blocks_per_split = key_blocks, .efficiency = wave_efficiency(tiles, slots)};
  if (key_blocks <= 1 || tiles >= 0.8 * slots) return plan;
  const int most = std::min({max_splits, key_blocks, slots});
  std::vector<double> efficiency(most + 1, 0.0);  // 0: a candidate that only adds CTAs
  double best = 0;
  for (int s = 1; s <= most; ++s) {
    if (s > 1 && ceil_div(key_blocks, s) == ceil_div(key_blocks, s - 1)) continue;
    efficiency[s] = wave_efficiency(tiles * s, slots);
    best = std::max(best, efficiency[s]);
  }
  for (int s = 1; s <= most; ++s)
    if (efficiency[s] >= 0.85 * best)  // s pieces of ceil(key_blocks / s) tiles: none empty (the skip rule)
      return {.splits = s, .blocks_per_split = ceil_div(key_blocks, s), .efficiency = efficiency[s]};
  return plan;  // not reached: the best candidate always qualifies
}

void combine_row(const std::vector<double>& o_parts, const std::vector<double>& lse_parts, int head_dim,
                 double sink, std::vector<double>& o, double& lse) {
  const std::size_t splits = lse_parts.size();
  if (head_dim < 1 || o_parts.size() != splits * head_dim)
    throw std::invalid_argument("combine_row: o_parts must hold one row of head_dim values per split");
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
}

}  // namespace decoding
