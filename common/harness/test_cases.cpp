#include "common/harness/test_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/host/host_data.h"

namespace fa::testing {
namespace {

// Awkward on purpose: lengths that are not multiples of any tile size, a single row, a single
// key, more queries than keys under causal masking (the first Sq - Sk rows see nothing). The
// 1013 x 1013 shapes keep to 2 heads: the float64 reference costs O(Sq * Sk * D) per head.
// core: the shapes marked in kCoreShape (single row and key, GQA 127 causal, rows that see no
// key, one query row over 1013 keys, tile-aligned MQA without the mask).
constexpr Shape kShapes[] = {
    {1, 1, 1, 1, 1, false},      {1, 1, 1, 1, 1, true},       {1, 2, 1, 17, 17, true},
    {2, 4, 2, 127, 127, false},  {2, 4, 2, 127, 127, true},   {1, 2, 2, 1013, 1013, false},
    {1, 2, 2, 1013, 1013, true}, {1, 2, 1, 17, 127, true},    {1, 2, 1, 127, 17, true},
    {2, 3, 3, 1, 1013, true},    {1, 2, 2, 1013, 1, false},   {3, 2, 1, 64, 128, false},
    {1, 4, 4, 128, 64, true},
};
constexpr bool kCoreShape[] = {false, true, false, false, true, false, false, false, true, true, false, true, false};
static_assert(std::size(kCoreShape) == std::size(kShapes));

// Long context with large logits (InputKind::large_logits: scores ~ +-150 typical, ~+-500 at the
// extremes of 70,000 keys). One query row (a decoding step) and a 4k x 4k square.
constexpr Shape kLongShapes[] = {{1, 4, 2, 1, 70000, false}, {1, 1, 1, 4096, 4096, false}};

// The hard inputs (host_data.h) run on this shape: long enough for many key tiles and for the
// scores' rounding to add up, causal (rows of every length), GQA (dK, dV sum two query heads).
constexpr Shape kHardInputsShape{1, 4, 2, 700, 700, true};
constexpr InputKind kHardInputs[] = {InputKind::large_logits, InputKind::tiny_logits,
                                     InputKind::constant_scores, InputKind::rare_spikes};

// Grids beyond 65,535 blocks along y and z (common/device/grid.cuh): (batch, head) pairs, and
// query tiles of one head for a kernel that put them on y (128-row tiles are the largest we use).
// A chapter that takes [B, S, H, D] (Support::bshd) runs these in that layout too: rows H D apart,
// heads D apart, with GQA, MQA, Sq != Sk both ways and a single query row.
constexpr Shape kBshdShapes[] = {
    {2, 4, 2, 127, 127, true}, {1, 2, 1, 127, 17, true}, {2, 3, 3, 1, 1013, true}, {3, 2, 1, 64, 128, false},
    {1, 6, 2, 1013, 1013, false},
};

// Sliding windows (Problem::window_left, window_right), for a chapter whose Support takes them:
// Mistral's causal window over GQA; both sides open by different amounts with Sq < Sk; the
// diagonal alone with more queries than keys (its first rows see nothing); one query row over a
// long cache with the left bound only; a long causal window with large logits (every row from
// 256 on sees 257 keys, over two or three key tiles).
struct WindowShape {
  Shape shape;
  int left, right;
  InputKind inputs;
};
constexpr WindowShape kWindowShapes[] = {
    {{2, 4, 2, 1013, 1013, true}, 127, 0, InputKind::normal},
    {{1, 2, 2, 300, 777, false}, 64, 31, InputKind::normal},
    {{1, 2, 1, 777, 300, true}, 0, -1, InputKind::normal},
    {{1, 4, 2, 1, 5000, false}, 1000, -1, InputKind::normal},
    {{1, 2, 2, 4096, 4096, true}, 256, 0, InputKind::large_logits},
};

// Logit softcaps (Problem::softcap), for a chapter whose Support takes them: a cap of 30 (Gemma 2
// caps its final logits there, its attention scores at 50; scores of size ~1 hardly bend) over GQA
// under causal masking; a cap of 5, which bends a row's largest scores (~3: by 10%), over MQA with
// Sq < Sk, and again with more queries than keys under causal masking (its first rows see
// nothing); and large logits (~+-150) under a cap of 30, where tanh saturates: a score of 150
// lands within 0.003 of 30, so the softmax spreads over the many keys near the cap instead of
// picking one, and the backward's 1 - tanh^2 is 2e-4 there. core: the first, second and last.
struct SoftcapShape {
  Shape shape;
  float softcap;
  InputKind inputs;
  bool core;
};
constexpr SoftcapShape kSoftcapShapes[] = {
    {{2, 4, 2, 127, 127, true}, 30.0f, InputKind::normal, true},
    {{1, 2, 1, 300, 777, false}, 5.0f, InputKind::normal, true},
    {{1, 2, 2, 777, 300, true}, 5.0f, InputKind::normal, false},
    {{1, 4, 2, 700, 700, true}, 30.0f, InputKind::large_logits, true},
};

// Packed varlen batches (Problem::cu_seqlens_q, cu_seqlens_k), for a chapter whose Support takes
// them, in each dtype it takes [B, S, H, D] in. core: self-attention under causal masking over
// lengths 1, 129, 0 (an empty sequence), 257 and 513, and the same queries non-causal over other
// key lengths (64, 236, 1, 199, 600: one sequence has keys and no queries). full adds a sequence
// with queries and no keys (O = 0, LSE = +inf) beside one with more queries than keys under causal
// masking, a long one (2,000) between short ones over MQA, and, where the chapter takes a sliding
// window, Mistral's causal window and a two-sided one over different key lengths.
const VarlenShape kVarlenShapes[] = {
    {4, 2, {0, 1, 130, 130, 387, 900}, {0, 1, 130, 130, 387, 900}, true, -1, -1, true},
    {4, 2, {0, 1, 130, 130, 387, 900}, {0, 64, 300, 301, 500, 1100}, false, -1, -1, true},
    {4, 1, {0, 17, 50, 350}, {0, 100, 100, 350}, true, -1, -1, false},
    {2, 1, {0, 3, 2003, 2080}, {0, 3, 2003, 2080}, true, -1, -1, false},
    {4, 2, {0, 300, 301, 1013}, {0, 300, 301, 1013}, true, 127, 0, false},
    {2, 2, {0, 200, 700}, {0, 500, 777}, false, 64, 31, false},
};

constexpr Shape kManyHeads{129, 512, 128, 3, 5, true};             // B * H = 66,048
constexpr Shape kManyRows{1, 1, 1, 128 * 65536 + 1, 2, false};     // 65,537 tiles of 128 rows

// x in a gtest name: "30", "0p5" (a name takes letters, digits and underscores only).
std::string number_name(float x) {
  std::ostringstream s;
  s << x;
  std::string name = s.str();
  std::replace(name.begin(), name.end(), '.', 'p');
  return name;
}

std::string name_of(const Problem& p, InputKind inputs = InputKind::normal) {
  return "B" + std::to_string(p.batch) + "_H" + std::to_string(p.heads) + "x" +
         std::to_string(p.kv_heads) + "_Sq" + std::to_string(p.seqlen_q) + "_Sk" +
         std::to_string(p.seqlen_k) + "_D" + std::to_string(p.head_dim) +
         (p.causal ? "_causal_" : "_") + dtype_name(p.dtype) +
         (inputs == InputKind::normal ? "" : std::string("_") + input_kind_name(inputs)) +
         (p.is_varlen() ? "_varlen" : p.layout == Layout::bshd ? (p.has_input_strides() ? "_fusedqkv" : "_bshd") : "") +
         (p.has_window() ? "_W" + std::string(p.window_left < 0 ? "inf" : std::to_string(p.window_left)) + "x" +
                               (p.window_right < 0 ? "inf" : std::to_string(p.window_right))
                         : "") +
         (p.has_softcap() ? "_softcap" + number_name(p.softcap) : "");
}


// Whether varlen shape v runs for a chapter with support s in this tier (its Support takes a
// packed batch: s.varlen).
bool runs(const Support& s, const VarlenShape& v) {
  const bool window = v.left >= 0 || v.right >= 0;
  return (test_tier() == Tier::full || v.core) && (!window || s.window);
}

bool supports(const Support& s, const Problem& p) {
  const bool dtype = std::find(s.dtypes.begin(), s.dtypes.end(), p.dtype) != s.dtypes.end();
  return dtype && supports_head_dim(s, p.head_dim);
}

// A teacher's hidden cases (README: For teachers), read from outside the repository.
std::vector<Problem> extra_problems() {
  namespace fs = std::filesystem;
  const char* dir = std::getenv("FA_EXTRA_TESTS_DIR");
  if (dir == nullptr || *dir == '\0') return {};
  if (!fs::is_directory(dir))
    throw std::runtime_error(std::string("FA_EXTRA_TESTS_DIR=") + dir + " is not a directory");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  std::vector<Problem> problems;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::string where = file.string() + ":" + std::to_string(n) + ": ";
      const std::string text = line.substr(0, line.find('#'));
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank, or a comment
      std::istringstream fields(text);
      Problem p;
      int causal = -1;
      std::string dtype, extra;
      fields >> p.batch >> p.heads >> p.kv_heads >> p.seqlen_q >> p.seqlen_k >> p.head_dim >> causal >> dtype;
      if (!fields || fields >> extra || (causal != 0 && causal != 1))
        throw std::runtime_error(where + "expected 'batch heads kv_heads seqlen_q seqlen_k head_dim "
                                 "causal(0|1) dtype(f32|f16|bf16)', got '" + line + "'");
      p.causal = causal == 1;
      try {
        p.dtype = parse_dtype(dtype);
        p.validate();
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(where + e.what());
      }
      problems.push_back(p);
    }
  }
  return problems;
}

// The head dim of the core tier's 4k x 4k case: 128, else the largest below it, else the smallest.
int core_square_dim(const std::vector<int>& head_dims) {
  int best = head_dims.front();
  for (int d : head_dims)
    if (d <= 128 && (best > 128 || d > best)) best = d;
  return best;
}

// core: which hard inputs (kHardInputs[kind]) run at the `instance`-th of `instances` (dtype,
// head dim) pairs. Each pair runs one kind, the kinds taking turns, and a chapter with fewer than
// four pairs runs the kinds left over at its pairs too: every instantiation meets a hard input
// (besides the long-context large logits, below), every kind runs at least once, and the float64
// reference is paid for a quarter of the cases. full runs every kind everywhere.
bool core_hard_input(std::size_t kind, int instance, int instances) {
  const int k = static_cast<int>(kind), kinds = static_cast<int>(std::size(kHardInputs));
  return k == instance % kinds || k % std::max(instances, 1) == instance;
}

}  // namespace

Problem problem_of(const Shape& s, int head_dim, Dtype dtype) {
  Problem p;
  p.batch = s.batch;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.head_dim = head_dim;
  p.causal = s.causal;
  p.dtype = dtype;
  return p;
}

Problem problem_of(const VarlenShape& s, int head_dim, Dtype dtype) {
  Problem p = problem_of(Shape{1, s.heads, s.kv_heads, s.cu_q.back(), s.cu_k.back(), s.causal}, head_dim, dtype);
  p.layout = Layout::bshd;
  p.cu_seqlens_q = s.cu_q;
  p.cu_seqlens_k = s.cu_k;
  p.window_left = s.left;
  p.window_right = s.right;
  return p;
}

std::vector<NamedProblem> varlen_cases(const Support& support, const std::vector<int>& head_dims,
                                       const std::vector<VarlenShape>& shapes) {
  std::vector<NamedProblem> cases;
  if (!support.varlen) return cases;
  for (Dtype dtype : support.dtypes) {
    if (!takes_bshd(support, dtype)) continue;
    for (int d : head_dims)
      for (const VarlenShape& v : shapes) {
        if (!runs(support, v)) continue;
        const Problem p = problem_of(v, d, dtype);
        cases.push_back({name_of(p), p});
      }
  }
  return cases;
}

Tier test_tier() {
  const char* tier = std::getenv("FA_TEST_TIER");
  const std::string t = tier != nullptr && *tier != '\0' ? tier : FA_TEST_TIER_DEFAULT;
  if (t == "core") return Tier::core;
  if (t == "full") return Tier::full;
  throw std::runtime_error("FA_TEST_TIER=" + t + ": expected core or full");
}

std::vector<NamedProblem> sweep(const Support& support, const std::vector<int>& head_dims) {
  const bool full = test_tier() == Tier::full;
  std::vector<NamedProblem> cases;
  int instance = 0;  // (dtype, head dim) pairs so far: core rotates the [B, S, H, D] shape with it
  const int instances = static_cast<int>(support.dtypes.size() * head_dims.size());
  for (Dtype dtype : support.dtypes) {
    for (int d : head_dims) {
      for (std::size_t n = 0; n < std::size(kShapes); ++n) {
        if (!full && !kCoreShape[n]) continue;
        const Problem p = problem_of(kShapes[n], d, dtype);
        cases.push_back({name_of(p), p});
      }
      for (std::size_t n = 0; n < std::size(kHardInputs); ++n) {
        if (!full && !core_hard_input(n, instance, instances)) continue;
        const Problem p = problem_of(kHardInputsShape, d, dtype);
        cases.push_back({name_of(p, kHardInputs[n]), p, kHardInputs[n]});
      }
      for (const Shape& s : kLongShapes) {
        // core: the 4k x 4k square (its float64 reference takes seconds) at one head dim, 128 (the
        // lazy rescale's) or the nearest below it; the single row over 70,000 keys there and at
        // the smallest and the largest head dim, which take the other tile widths.
        const bool square_dim = d == core_square_dim(head_dims);
        const bool end_dim = d == *std::min_element(head_dims.begin(), head_dims.end()) ||
                             d == *std::max_element(head_dims.begin(), head_dims.end());
        if (!full && !square_dim && (s.seqlen_q > 1 || !end_dim)) continue;
        const Problem p = problem_of(s, d, dtype);
        cases.push_back({name_of(p, InputKind::large_logits), p, InputKind::large_logits});
      }
      if (support.window) {  // sliding windows: the first two in core, at every (dtype, head dim)
        for (std::size_t n = 0; n < std::size(kWindowShapes); ++n) {
          if (!full && n >= 2) continue;
          const WindowShape& w = kWindowShapes[n];
          Problem p = problem_of(w.shape, d, dtype);
          p.window_left = w.left;
          p.window_right = w.right;
          cases.push_back({name_of(p, w.inputs), p, w.inputs});
        }
      }
      if (support.softcap) {  // logit softcaps: three in core, at every (dtype, head dim)
        for (const SoftcapShape& c : kSoftcapShapes) {
          if (!full && !c.core) continue;
          Problem p = problem_of(c.shape, d, dtype);
          p.softcap = c.softcap;
          cases.push_back({name_of(p, c.inputs), p, c.inputs});
        }
      }
      if (takes_bshd(support, dtype)) {
        for (std::size_t n = 0; n < std::size(kBshdShapes); ++n) {
          if (!full && n != static_cast<std::size_t>(instance) % std::size(kBshdShapes)) continue;
          Problem p = problem_of(kBshdShapes[n], d, dtype);
          p.layout = Layout::bshd;
          cases.push_back({name_of(p), p});
          // Q, K and V as the slices of one fused QKV projection (Support::input_strides): the
          // shapes with Sq = Sk, in core the first one.
          if (support.input_strides && p.seqlen_q == p.seqlen_k && (full || n == 0)) {
            set_fused_qkv(p);
            cases.push_back({name_of(p), p});
          }
        }
        if (support.varlen) {
          for (const VarlenShape& v : kVarlenShapes) {
            if (!runs(support, v)) continue;
            const Problem p = problem_of(v, d, dtype);
            cases.push_back({name_of(p), p});
          }
        }
      }
      ++instance;
    }
  }
  if (!head_dims.empty()) {
    const int d = *std::min_element(head_dims.begin(), head_dims.end());
    for (Dtype dtype : support.dtypes) {
      if (!full && dtype != support.dtypes.front()) continue;
      const Problem p = problem_of(kManyHeads, d, dtype);
      cases.push_back({name_of(p), p});
    }
    // 8,388,609 query rows: seconds of host work per case (inputs, two yardsticks and the
    // comparison of 537 million outputs at D = 64), so full only. core's grid beyond 65,535 rows
    // of blocks along y is kManyHeads above.
    if (full) {
      const Problem p = problem_of(kManyRows, d, support.dtypes.front());
      cases.push_back({name_of(p), p});
    }
  }
  std::set<std::string> extra_names;  // a case listed twice runs once
  for (const Problem& p : extra_problems()) {
    const std::string name = "Extra_" + name_of(p);
    if (supports(support, p) && extra_names.insert(name).second) cases.push_back({name, p});
  }
  return cases;
}

bool verbose() {
  const char* v = std::getenv("FA_TEST_VERBOSE");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::uint64_t seed_of(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

std::vector<std::uint8_t> download_guarded(const cuda::DeviceBuffer& buffer, const std::string& what) {
  std::vector<std::uint8_t> bytes = buffer.download();
  EXPECT_TRUE(std::all_of(bytes.end() - kGuardBytes, bytes.end(), [](auto b) { return b == kPoisonByte; }))
      << "the kernel wrote past the end of " << what;
  bytes.resize(bytes.size() - kGuardBytes);
  return bytes;
}

DeviceInputs upload_inputs(const Problem& p, const HostInputs& in) {
  const std::size_t elem = dtype_size(p.dtype);
  DeviceInputs d;
  if (p.has_input_strides()) {
    d.qkv_buf = cuda::DeviceBuffer((p.q_elems() + p.kv_elems() + p.v_elems()) * elem);
    d.qkv_buf.upload(fused_qkv(encode(in.q, p.dtype), encode(in.k, p.dtype), encode(in.v, p.dtype), p));
    const FusedOffsets at = fused_qkv_offsets(p);
    d.q = d.qkv_buf.as<std::uint8_t>() + at.q * elem;
    d.k = d.qkv_buf.as<std::uint8_t>() + at.k * elem;
    d.v = d.qkv_buf.as<std::uint8_t>() + at.v * elem;
    return d;
  }
  d.q_buf = cuda::DeviceBuffer(p.q_elems() * elem);
  d.k_buf = cuda::DeviceBuffer(p.kv_elems() * elem);
  d.v_buf = cuda::DeviceBuffer(p.v_elems() * elem);
  d.q_buf.upload(to_layout(encode(in.q, p.dtype), p, Operand::q));
  d.k_buf.upload(to_layout(encode(in.k, p.dtype), p, Operand::k));
  d.v_buf.upload(to_layout(encode(in.v, p.dtype), p, Operand::v));
  d.q = d.q_buf.get();
  d.k = d.k_buf.get();
  d.v = d.v_buf.get();
  return d;
}

std::vector<BadProblem> bad_problems(const Support& s, const Problem& defaults) {
  std::vector<BadProblem> cases;
  auto add = [&](const std::string& name, auto edit, const std::string& expect) {
    Problem p = defaults;
    p.dtype = s.dtypes.front();
    edit(p);
    cases.push_back({name, p, expect});
  };
  add("HeadDimZero", [](Problem& p) { p.head_dim = 0; }, "head_dim");
  add("NegativeBatch", [](Problem& p) { p.batch = -1; }, "batch");
  add("NegativeSeqlenQ", [](Problem& p) { p.seqlen_q = -5; }, "seqlen_q");
  add("NegativeSeqlenK", [](Problem& p) { p.seqlen_k = -5; }, "seqlen_k");
  add("KvHeadsNotDividingHeads", [](Problem& p) { p.heads = 4; p.kv_heads = 3; }, "kv_heads");
  add("NonPositiveScale", [](Problem& p) { p.softmax_scale = 0.0f; }, "softmax_scale");
  const int unsupported_d = s.head_dims.empty() ? s.max_head_dim + 1 : s.head_dims.back() + 8;
  add("UnsupportedHeadDim", [&](Problem& p) { p.head_dim = unsupported_d; }, "head_dim");
  if (s.head_dims.empty() && s.head_dim_multiple > 1)  // a head dim below the maximum, off the multiple
    add("HeadDimNotMultiple", [&](Problem& p) { p.head_dim = s.head_dim_multiple + 1; }, "head_dim");
  // V's head dim apart from Q and K's (Problem::head_dim_v): refused by a chapter that names none,
  // and one other than the named one by a chapter that names one.
  if (s.head_dim_v == 0)
    add("SeparateVHeadDim", [](Problem& p) { p.head_dim_v = p.head_dim / 2; }, "V's head dim");
  else
    add("OtherVHeadDim", [&](Problem& p) { p.head_dim_v = s.head_dim_v + 8; }, "V's head dim");
  // [B, S, H, D] in a dtype the table does not take it in: "LayoutBshd" (the first dtype) where it
  // takes none, else each such dtype ("LayoutBshd_f32").
  for (Dtype d : s.dtypes) {
    if (takes_bshd(s, d)) continue;
    if (s.bshd_dtypes.empty()) {
      add("LayoutBshd", [](Problem& p) { p.layout = Layout::bshd; }, "layout");
      break;
    }
    add(std::string("LayoutBshd_") + dtype_name(d), [d](Problem& p) { p.layout = Layout::bshd; p.dtype = d; }, "layout");
  }
  // Q read through strides other than the layout's (a fused QKV projection's slice, rows 3 H D
  // apart): refused by a chapter without Support::input_strides that takes [B, S, H, D] (one that
  // does not refuses the layout first); malformed strides and [B, H, S, D] with them refused by one
  // with it.
  const bool bshd_first = takes_bshd(s, s.dtypes.front());
  auto fused_q = [](Problem& p) {
    p.layout = Layout::bshd;
    p.q_input = Strides{std::int64_t{p.seqlen_q} * 3 * p.heads * p.head_dim, p.head_dim, 3 * std::int64_t{p.heads} * p.head_dim};
  };
  if (!s.input_strides && bshd_first) add("InputStrides", fused_q, "strides");
  if (s.input_strides) {
    add("InputStridesNotMultipleOf8", [&](Problem& p) { fused_q(p); p.q_input->row += 4; }, "multiples of 8");
    add("InputStridesWithBhsd", [&](Problem& p) { fused_q(p); p.layout = Layout::bhsd; }, "layout bshd");
  }
  // A packed varlen batch of two sequences: refused, naming it, by a chapter without Support::varlen
  // (check_forward_args refuses it before the layout); malformed ones refused by one with it.
  auto varlen = [](Problem& p) {
    p.batch = 1;
    p.layout = Layout::bshd;
    p.cu_seqlens_q = {0, p.seqlen_q / 2, p.seqlen_q};
    p.cu_seqlens_k = {0, p.seqlen_k / 3, p.seqlen_k};
  };
  if (!s.varlen) add("Varlen", varlen, "varlen");
  if (s.varlen) {
    add("VarlenNotEndingAtSeqlen", [&](Problem& p) { varlen(p); p.cu_seqlens_q.back() -= 1; }, "cu_seqlens_q");
    add("VarlenDecreasing", [&](Problem& p) { varlen(p); p.cu_seqlens_k[1] = p.seqlen_k + 1; }, "must not decrease");
    add("VarlenSizesDiffer", [&](Problem& p) { varlen(p); p.cu_seqlens_k.insert(p.cu_seqlens_k.begin() + 1, 0); }, "same size");
    add("VarlenKeysUnset", [&](Problem& p) { varlen(p); p.cu_seqlens_k.clear(); }, "set together");
    add("VarlenBatch2", [&](Problem& p) { varlen(p); p.batch = 2; }, "batch 1");
    add("VarlenBhsd", [&](Problem& p) { varlen(p); p.layout = Layout::bhsd; }, "bshd");
  }
  // A sliding window where the chapter takes none (Support::window), and a malformed one anywhere.
  if (!s.window) add("SlidingWindow", [](Problem& p) { p.window_left = 16; p.window_right = 0; }, "sliding window");
  add("WindowBelowMinusOne", [](Problem& p) { p.window_right = -2; }, "window_right");
  // A logit softcap where the chapter takes none (Support::softcap), and malformed ones anywhere.
  if (!s.softcap) add("Softcap", [](Problem& p) { p.softcap = 30.0f; }, "softcap");
  add("NegativeSoftcap", [](Problem& p) { p.softcap = -1.0f; }, "softcap");
  add("SoftcapNaN", [](Problem& p) { p.softcap = std::numeric_limits<float>::quiet_NaN(); }, "softcap");
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    if (std::find(s.dtypes.begin(), s.dtypes.end(), d) == s.dtypes.end())
      add(std::string("UnsupportedDtype_") + dtype_name(d), [&](Problem& p) { p.dtype = d; }, "dtype");
  }
  return cases;
}

}  // namespace fa::testing
