// The step-by-step versions of chapter 05 (steps.h): one Config each (flash_v2.h), every head dim
// up to 128 like the chapter; the tests sweep D = 64 and 128.
#include "05_flash_v2/steps/steps.h"

#include <stdexcept>

#include "05_flash_v2/flash_v2.h"

namespace flash_v2::steps {
namespace {

template <class C>
Step make(const std::string& name, const std::string& what) {
  return {.name = name,
          .what = what,
          .chapter = {.support = {.chapter = "05_flash_v2." + name, .dtypes = {fa::Dtype::f32}, .max_head_dim = 128},
                      .forward = forward_with<C>,
                      .test_head_dims = {64, 128},
                      .defaults = fa::default_problem(fa::Dtype::f32)}};
}

}  // namespace

const std::vector<Step>& all() {
  static const std::vector<Step> steps = {
      make<Config<>>("chapter", "nothing: the chapter's kernel"),
      make<NoCausalSkip>("no_causal_skip", "causal tile skipping: every key tile visited, every causal tile masked"),
      make<Expf>("expf", "exp2 with scale * log2(e) folded into Q: S in natural-log units, p = expf(s - m)"),
      make<NormalizeEachTile>("normalize_each_tile", "normalize once: O_i divided by l_i after every key tile, as in 04"),
      make<NoCopyOverlap>("no_copy_overlap", "the cp.async overlap: copy K_j and V_j, wait for both, then compute"),
      make<PlainLanes>("plain_lanes", "the interleaved lane order: ty = lane / 8, tx = lane % 8 (4-pass K, V loads)"),
  };
  return steps;
}

}  // namespace flash_v2::steps
