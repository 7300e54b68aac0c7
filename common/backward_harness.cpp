#include "common/backward_harness.h"

#include <algorithm>
#include <map>

#include "common/backward_check.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"

namespace fa::testing {
namespace {

struct Shape {
  int batch, heads, kv_heads, seqlen_q, seqlen_k;
  bool causal;
};

// The forward harness's shapes (test_harness.cpp), awkward on purpose: lengths that are not
// multiples of any tile size, a single row, a single key, more queries than keys under causal
// masking (the first Sq - Sk rows see nothing). The float64 reference_backward costs
// O(Sq * Sk * D) per head, so the 1013 x 1013 shapes keep to 2 heads.
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

// Bytes after each gradient that a kernel must not touch.
constexpr std::size_t kGuard = 256;

// Downloads a poisoned output with its guard bytes; checks the guard and drops it.
std::vector<std::uint8_t> download_guarded(const cuda::DeviceBuffer& buffer, const char* name) {
  std::vector<std::uint8_t> bytes = buffer.download();
  EXPECT_TRUE(std::all_of(bytes.end() - kGuard, bytes.end(), [](auto b) { return b == kPoisonByte; }))
      << "the backward wrote past the end of " << name;
  bytes.resize(bytes.size() - kGuard);
  return bytes;
}

}  // namespace

std::vector<BackwardCase> backward_cases(const BackwardChapter& chapter) {
  std::vector<BackwardCase> cases;
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
  return cases;
}

std::vector<BackwardRefusalCase> backward_refusal_cases(const BackwardChapter& chapter) {
  const Support& s = chapter.support;
  std::vector<BackwardRefusalCase> cases;
  auto add = [&](const std::string& name, auto edit, const std::string& expect, const std::string& null_tensor = "") {
    Problem p = chapter.defaults;
    p.dtype = s.dtypes.front();
    edit(p);
    cases.push_back({&chapter, p, null_tensor, expect, name});
  };
  auto keep = [](Problem&) {};
  add("HeadDimZero", [](Problem& p) { p.head_dim = 0; }, "head_dim");
  add("NegativeBatch", [](Problem& p) { p.batch = -1; }, "batch");
  add("NegativeSeqlen", [](Problem& p) { p.seqlen_k = -5; }, "seqlen_k");
  add("KvHeadsNotDividingHeads", [](Problem& p) { p.heads = 4; p.kv_heads = 3; }, "kv_heads");
  add("NonPositiveScale", [](Problem& p) { p.softmax_scale = 0.0f; }, "softmax_scale");
  for (const char* tensor : {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"})
    add(std::string("Null_") + tensor, keep, "null", tensor);
  const int unsupported_d = s.head_dims.empty() ? s.max_head_dim + 1 : s.head_dims.back() + 8;
  add("UnsupportedHeadDim", [&](Problem& p) { p.head_dim = unsupported_d; }, "head_dim");
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    if (std::find(s.dtypes.begin(), s.dtypes.end(), d) == s.dtypes.end()) {
      add(std::string("UnsupportedDtype_") + dtype_name(d), [&](Problem& p) { p.dtype = d; }, "dtype");
    }
  }
  return cases;
}

void check_backward_refusal(const BackwardRefusalCase& c) {
  // Never dereferenced: the chapter must refuse before touching device memory.
  static float dummy[4];
  std::map<std::string, float*> t;
  for (const char* name : {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"}) t[name] = dummy;
  if (!c.null_tensor.empty()) t[c.null_tensor] = nullptr;
  try {
    c.chapter->backward(c.problem, t["q"], t["k"], t["v"], t["o"], t["lse"], t["dout"], t["dq"], t["dk"],
                        t["dv"], nullptr);
    FAIL() << c.chapter->support.chapter << " accepted " << c.problem.describe()
           << (c.null_tensor.empty() ? "" : " with a null " + c.null_tensor)
           << "; expected std::invalid_argument mentioning '" << c.expect << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
        << "message '" << e.what() << "' does not mention '" << c.expect << "'";
  }
}

void check_backward(const BackwardCase& c) {
  const std::string reason = cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const Problem& p = c.problem;
  const std::uint64_t seed = seed_of(c.name);
  const HostInputs in = make_inputs(p, seed);
  const std::vector<float> dout_host = make_dout(p, seed);
  const std::size_t elem = dtype_size(p.dtype);

  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem);
  cuda::DeviceBuffer o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * elem);
  cuda::DeviceBuffer dq(p.q_elems() * elem + kGuard), dk(p.kv_elems() * elem + kGuard),
      dv(p.kv_elems() * elem + kGuard);
  q.upload(encode(in.q, p.dtype));
  k.upload(encode(in.k, p.dtype));
  v.upload(encode(in.v, p.dtype));
  dout.upload(encode(dout_host, p.dtype));
  dq.poison();
  dk.poison();
  dv.poison();

  // O and LSE from the chapter's forward (its own tests check them against the reference).
  c.chapter->forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr);
  c.chapter->backward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), dout.get(), dq.get(), dk.get(),
                      dv.get(), nullptr);
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  const std::vector<std::uint8_t> dq_bytes = download_guarded(dq, "dQ"), dk_bytes = download_guarded(dk, "dK"),
                                  dv_bytes = download_guarded(dv, "dV");
  const BackwardCheck check = fa::check_backward(p, in, dout_host, dq_bytes, dk_bytes, dv_bytes);
  EXPECT_TRUE(check.pass()) << p.describe() << "\n" << check.summary();
}

}  // namespace fa::testing
