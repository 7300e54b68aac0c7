// What the forward and the backward test harnesses share: the sweep of awkward shapes (plus a
// teacher's hidden cases), per-case seeds, guard bytes after each output, and the bad problems
// every chapter must refuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/harness/chapter.h"
#include "common/cuda/device_memory.h"
#include "common/host/host_data.h"

namespace fa::testing {

// Two tiers of test cases. core (ctest's default, scripts/test.sh): every kernel instantiation a
// chapter has (dtype x head dim x mode x layout) on a few awkward shapes, the hard inputs and the
// long-context large-logit cases. full (scripts/test.sh --full): every shape at every dtype and
// head dim. FA_TEST_TIER=core|full picks one; unset, the build's default (cmake/Chapter.cmake:
// core, or full for the per-case ctest entries that grading uses).
enum class Tier { core, full };
Tier test_tier();

// A test shape; problem_of makes it a Problem at one head dim and dtype.
struct Shape {
  int batch, heads, kv_heads, seqlen_q, seqlen_k;
  bool causal;
};
Problem problem_of(const Shape& s, int head_dim, Dtype dtype);

// A packed varlen batch as a test shape (Problem::cu_seqlens_q, cu_seqlens_k: B + 1 offsets each),
// with its masks; core: the core tier runs it too (full runs every one). problem_of makes it a
// [1, total, H, D] (Layout::bshd) Problem at one head dim and dtype.
struct VarlenShape {
  int heads, kv_heads;
  std::vector<int> cu_q, cu_k;
  bool causal;
  int left, right;  // the window; -1, -1: none
  bool core;
};
Problem problem_of(const VarlenShape& s, int head_dim, Dtype dtype);

struct NamedProblem {
  std::string name;  // a valid gtest name: B2_H4x2_Sq127_Sk127_D64_causal_bf16
  Problem problem;
  InputKind inputs = InputKind::normal;
};

// The cases of test_tier()'s tier. full: every supported dtype x `head_dims` x the shapes: seqlen 1, 17, 127, 1013; Sq != Sk both
// ways (including rows that see no key under causal masking); MHA, GQA and MQA; causal and not.
// Every dtype x head dim also runs the hard inputs (host_data.h: large and tiny logits, constant
// scores, rare spikes) on a causal 700 x 700 GQA shape. Grids beyond CUDA's 65,535 blocks along y
// and z: every dtype at the smallest head dim runs batch x heads = 66,048 (short sequences), and
// the first dtype one head of 8,388,609 query rows (more than 65,535 tiles of 128 rows). Long
// context, every dtype x head dim: large logits (~+-500) over 70,000 keys for one query row, and
// over 4,096 keys for 4,096 rows, where a per-tile drift of the running sum adds up over
// thousands of key tiles. core keeps, per dtype x head dim, five of the shapes, one [B, S, H, D]
// shape, one of the hard inputs (the kinds take turns; each runs at least once); per dtype the 4k
// square at one head dim and the long single row at three (the smallest, that one, the largest);
// and batch x heads = 66,048 at the first dtype (the 8-million-row case is full only).
// A chapter whose Support takes them runs sliding windows, logit softcaps (named ..._softcap30)
// and, in each dtype it takes as [B, S, H, D], Q, K, V as a fused QKV projection's slices and
// packed varlen batches (named ..._varlen; test_cases.cpp lists the shapes of each).
// Then the hidden cases of $FA_EXTRA_TESTS_DIR/*.txt that the chapter supports, named Extra_...:
// one per line, `batch heads kv_heads seqlen_q seqlen_k head_dim causal(0|1) dtype`, '#' starts
// a comment; a malformed line throws std::runtime_error naming file:line.
std::vector<NamedProblem> sweep(const Support& support, const std::vector<int>& head_dims);

// A harness's own varlen cases beside sweep's (the backward's, backward_harness.cpp), named as
// sweep names its (..._varlen): every shape of `shapes` in this tier at every head dim of
// `head_dims`, in every dtype the chapter takes [B, S, H, D] in, where its Support takes a packed
// batch (varlen); a shape with a sliding window only where it takes one (window).
std::vector<NamedProblem> varlen_cases(const Support& support, const std::vector<int>& head_dims,
                                       const std::vector<VarlenShape>& shapes);

// FA_TEST_VERBOSE=1: the harnesses print every case's errors, passing ones too.
bool verbose();

// FNV-1a of the case name: each case has its own fresh, replayable inputs.
std::uint64_t seed_of(const std::string& name);

// Bytes after each output buffer that a kernel must not touch (they stay poisoned).
constexpr std::size_t kGuardBytes = 256;

// Downloads an output allocated with kGuardBytes extra, checks (EXPECT) that the guard is still
// poisoned, and returns the output without it.
std::vector<std::uint8_t> download_guarded(const cuda::DeviceBuffer& buffer, const std::string& what);

// Q, K and V of a test case on the GPU, as the chapter reads them: each in the problem's layout,
// or (input strides, Problem::q_input...) as the slices of one fused QKV buffer. q, k, v: where the
// chapter reads each; the buffers own the memory.
struct DeviceInputs {
  cuda::DeviceBuffer q_buf, k_buf, v_buf, qkv_buf;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
};
DeviceInputs upload_inputs(const Problem& p, const HostInputs& in);

struct BadProblem {
  std::string name;
  Problem problem;
  std::string expect;  // a word the error message must contain
};

// Problems every chapter must refuse with std::invalid_argument: zero head_dim, negative sizes,
// kv_heads not dividing heads, a non-positive scale, a head_dim or a dtype it does not support, a
// feature (layout, input strides, sliding window, softcap, varlen) it does not take, and malformed
// input strides, windows, softcaps and varlen offsets.
std::vector<BadProblem> bad_problems(const Support& support, const Problem& defaults);

}  // namespace fa::testing
