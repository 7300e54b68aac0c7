#include "common/test_harness.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/forward_check.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"

namespace fa::testing {
namespace {

struct Shape {
  int batch, heads, kv_heads, seqlen_q, seqlen_k;
  bool causal;
};

// Awkward on purpose: lengths that are not multiples of any tile size, a single row, a single
// key, more queries than keys under causal masking (the first Sq - Sk rows see nothing).
constexpr Shape kShapes[] = {
    {1, 1, 1, 1, 1, false},      {1, 1, 1, 1, 1, true},       {1, 2, 1, 17, 17, true},
    {2, 4, 2, 127, 127, false},  {2, 4, 2, 127, 127, true},   {1, 2, 2, 1013, 1013, false},
    {1, 2, 2, 1013, 1013, true}, {1, 2, 1, 17, 127, true},    {1, 2, 1, 127, 17, true},
    {2, 3, 3, 1, 1013, true},    {1, 2, 2, 1013, 1, false},   {3, 2, 1, 64, 128, false},
    {1, 4, 4, 128, 64, true},
};

// FNV-1a: a stable seed per case name, so each case has its own fresh, replayable inputs.
std::uint64_t seed_of(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

std::string name_of(const Problem& p) {
  return "B" + std::to_string(p.batch) + "_H" + std::to_string(p.heads) + "x" +
         std::to_string(p.kv_heads) + "_Sq" + std::to_string(p.seqlen_q) + "_Sk" +
         std::to_string(p.seqlen_k) + "_D" + std::to_string(p.head_dim) +
         (p.causal ? "_causal_" : "_") + dtype_name(p.dtype);
}

// Bytes after each output that a kernel must not touch.
constexpr std::size_t kGuard = 256;

bool supports(const Support& s, const Problem& p) {
  const bool dtype = std::find(s.dtypes.begin(), s.dtypes.end(), p.dtype) != s.dtypes.end();
  const bool head_dim = s.head_dims.empty()
                            ? p.head_dim <= s.max_head_dim
                            : std::find(s.head_dims.begin(), s.head_dims.end(), p.head_dim) != s.head_dims.end();
  return dtype && head_dim;
}

// A teacher's hidden cases: every *.txt file of $FA_EXTRA_TESTS_DIR (outside the repository), in
// name order, one case per line, '#' starts a comment:
//   batch heads kv_heads seqlen_q seqlen_k head_dim causal(0|1) dtype(f32|f16|bf16)
// A case the chapter does not support (dtype, head_dim) is left out; a malformed line stops the
// test binary with file:line. The cases are named Extra_<shape>, so their inputs are seeded
// differently from a built-in case of the same shape.
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

}  // namespace

std::vector<ForwardCase> forward_cases(const Chapter& chapter) {
  std::vector<ForwardCase> cases;
  for (Dtype dtype : chapter.support.dtypes) {
    for (int d : chapter.test_head_dims) {
      for (const Shape& s : kShapes) {
        Problem p;
        p.batch = s.batch;
        p.heads = s.heads;
        p.kv_heads = s.kv_heads;
        p.seqlen_q = s.seqlen_q;
        p.seqlen_k = s.seqlen_k;
        p.head_dim = d;
        p.causal = s.causal;
        p.dtype = dtype;
        cases.push_back({&chapter, p, name_of(p)});
      }
    }
  }
  std::set<std::string> extra_names;  // a case listed twice runs once
  for (const Problem& p : extra_problems()) {
    const std::string name = "Extra_" + name_of(p);
    if (supports(chapter.support, p) && extra_names.insert(name).second) cases.push_back({&chapter, p, name});
  }
  return cases;
}

std::vector<RefusalCase> refusal_cases(const Chapter& chapter) {
  const Support& s = chapter.support;
  std::vector<RefusalCase> cases;
  auto add = [&](const std::string& name, auto edit, const std::string& expect, bool null_o = false) {
    Problem p = chapter.defaults;
    p.dtype = s.dtypes.front();
    edit(p);
    cases.push_back({&chapter, p, null_o, expect, name});
  };
  add("HeadDimZero", [](Problem& p) { p.head_dim = 0; }, "head_dim");
  add("NegativeBatch", [](Problem& p) { p.batch = -1; }, "batch");
  add("NegativeSeqlen", [](Problem& p) { p.seqlen_q = -5; }, "seqlen_q");
  add("KvHeadsNotDividingHeads", [](Problem& p) { p.heads = 4; p.kv_heads = 3; }, "kv_heads");
  add("NullOutput", [](Problem&) {}, "null", true);
  const int unsupported_d = s.head_dims.empty() ? s.max_head_dim + 1 : s.head_dims.back() + 8;
  add("UnsupportedHeadDim", [&](Problem& p) { p.head_dim = unsupported_d; }, "head_dim");
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    if (std::find(s.dtypes.begin(), s.dtypes.end(), d) == s.dtypes.end()) {
      add(std::string("UnsupportedDtype_") + dtype_name(d), [&](Problem& p) { p.dtype = d; }, "dtype");
    }
  }
  return cases;
}

void check_refusal(const RefusalCase& c) {
  // Never dereferenced: the chapter must refuse before touching device memory.
  static float dummy[4];
  float* o = c.null_output ? nullptr : dummy;
  try {
    c.chapter->forward(c.problem, dummy, dummy, dummy, o, dummy, nullptr);
    FAIL() << c.chapter->support.chapter << " accepted " << c.problem.describe()
           << "; expected std::invalid_argument mentioning '" << c.expect << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
        << "message '" << e.what() << "' does not mention '" << c.expect << "'";
  }
}

void check_forward(const ForwardCase& c) {
  const std::string reason = cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const Problem& p = c.problem;
  const HostInputs in = make_inputs(p, seed_of(c.name));
  const std::size_t elem = dtype_size(p.dtype);

  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem);
  cuda::DeviceBuffer o(p.o_elems() * elem + kGuard), lse(p.lse_elems() * sizeof(float) + kGuard);
  q.upload(encode(in.q, p.dtype));
  k.upload(encode(in.k, p.dtype));
  v.upload(encode(in.v, p.dtype));
  o.poison();
  lse.poison();

  c.chapter->forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr);
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<std::uint8_t> o_bytes = o.download(), lse_bytes = lse.download();
  const bool guards_intact =
      std::all_of(o_bytes.end() - kGuard, o_bytes.end(), [](auto b) { return b == kPoisonByte; }) &&
      std::all_of(lse_bytes.end() - kGuard, lse_bytes.end(), [](auto b) { return b == kPoisonByte; });
  EXPECT_TRUE(guards_intact) << "the kernel wrote past the end of O or LSE";
  o_bytes.resize(o_bytes.size() - kGuard);
  lse_bytes.resize(lse_bytes.size() - kGuard);

  const ForwardCheck check = fa::check_forward(p, in, o_bytes, lse_bytes);
  EXPECT_TRUE(check.pass()) << p.describe() << "\n" << check.summary();
}

}  // namespace fa::testing
