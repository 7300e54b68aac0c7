// The steps of steps.h: each is launch.cuh's entry point with one configuration.
#include "11_backward_v3/steps/steps.h"

#include <stdexcept>
#include <string>

#include "09_flash_v3/flash_v3.h"  // the forward for O and LSE
#include "11_backward_v3/backward_v3.h"
#include "11_backward_v3/launch.cuh"

namespace backward_v3::steps {

namespace {

template <class T, int kD>
using SerialConfig = Config<T, kD, 64, false>;
template <class T, int kD>
using OverlapConfig = Config<T, kD, 64, true>;
template <class T, int kD>
using RowOrderConfig = Config<T, kD>;  // the row-by-row grid, every head dim
template <class T, int kD>
using LongestFirstConfig = Config<T, kD, (kD == 64 ? 128 : 64), true, backward::tc::DenseWalk, /*kLongestFirst=*/true>;
template <class T, int kD>
using SparseConfig = Config<T, kD, backward::kSparseBr, true, backward::tc::ListedWalk>;

template <template <class, int> class Cfg, bool kTurns>
void step_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
                   const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward_with<Cfg, kTurns>(backward_v3::chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv, stream);
}

fa::BackwardChapter step_chapter(fa::BackwardFn fn) {
  fa::BackwardChapter c = backward_v3::chapter();
  c.backward = fn;
  c.deterministic = nullptr;
  c.support.varlen = false;  // the steps' kernels take neither a packed batch nor a softcap (backward_with's kPacked)
  c.support.softcap = false;
  c.test_head_dims = {64, 96, 128};  // at 192 and 256 every step runs the one wide kernel (wide.cuh)
  return c;
}

}  // namespace

const std::vector<fa::BackwardStep>& all() {
  static const std::vector<fa::BackwardStep> steps{
      {"v1_serial", "the five products on wgmma, one commit group for S^T and dP^T, 64 rows a step",
       step_chapter(step_backward<SerialConfig, false>)},
      {"v2_overlap", "S^T, dP^T in two commit groups: P^T and dV overlap dP^T and dS^T",
       step_chapter(step_backward<OverlapConfig, false>)},
      {"v3_tall_d64", "128 query rows a step at D = 64 (at D = 128, v2's), the grid row by row",
       step_chapter(step_backward<RowOrderConfig, false>)},
      {"v4_deterministic", "dQ's adds in a fixed key-tile order (the chapter's deterministic mode)",
       step_chapter(step_backward<ChapterConfig, true>)},
      {"v6_longest_first", "v3 with a causal grid in the longest-first order, in L2-sized sections of rows (the chapter's order at D = 96, 128)",
       step_chapter(step_backward<LongestFirstConfig, false>)},
      {"v7_dq_first", "dQ's product before dK's: dQ goes to the writer while dK runs (the chapter's kernel)",
       step_chapter(step_backward<ChapterConfig, false>)},
  };
  return steps;
}

void backward_block_sparse(const fa::Problem& p, const backward::DeviceSparseWalk& walk, const void* q,
                           const void* k, const void* v, const void* o, const float* lse, const void* dout, void* dq,
                           void* dk, void* dv, cudaStream_t stream) {
  // 08's transposed walk lists 128-key tiles; past D = 128 the kernel's key tiles are 64 keys.
  if (p.head_dim > 128)
    throw std::invalid_argument("11_backward_v3 v5_block_sparse: head dims up to 128 (08's walk of 128-key tiles), not " +
                                std::to_string(p.head_dim));
  backward_with<SparseConfig, false>(backward_v3::chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv, stream,
                                     &walk);
}

}  // namespace backward_v3::steps
