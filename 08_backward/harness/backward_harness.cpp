#include "08_backward/harness/backward_harness.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>

#include "08_backward/harness/backward_check.h"
#include "common/cuda/cuda_check.h"
#include "common/harness/test_cases.h"

namespace fa::testing {
namespace {

// A backward's own packed varlen batches, beside sweep's (test_cases.cpp), in the core tier too.
// What a varlen backward gets wrong first: keys of a sequence without queries (dK = dV = 0, which
// it must still write), queries of one without keys (dQ = 0), sequences ending inside a tile, and
// rows that see no key at the start of a causal sequence with more queries than keys.
//   GQA, causal: (queries, keys) = (77, 150), (0, 45), (33, 0), (300, 257), (1, 1).
//   MQA, a two-sided window (where the chapter takes one): (200, 333), (0, 64), (129, 129), (63, 0).
const std::vector<VarlenShape> kBackwardVarlenShapes = {
    {.heads = 4, .kv_heads = 2, .cu_q = {0, 77, 77, 110, 410, 411}, .cu_k = {0, 150, 195, 195, 452, 453},
     .causal = true, .left = -1, .right = -1, .core = true},
    {.heads = 2, .kv_heads = 1, .cu_q = {0, 200, 200, 329, 392}, .cu_k = {0, 333, 397, 526, 526},
     .causal = false, .left = 96, .right = 17, .core = true},
};

}  // namespace

std::vector<BackwardCase> backward_cases(const BackwardChapter& chapter) {
  std::vector<BackwardCase> cases;
  for (NamedProblem& c : sweep(chapter.support, chapter.test_head_dims))
    cases.push_back({.chapter = &chapter, .problem = c.problem, .name = c.name, .inputs = c.inputs});
  for (NamedProblem& c : varlen_cases(chapter.support, chapter.test_head_dims, kBackwardVarlenShapes))
    cases.push_back({.chapter = &chapter, .problem = c.problem, .name = c.name, .inputs = c.inputs});
  return cases;
}

std::vector<BackwardCase> backward_step_cases(const std::vector<BackwardStep>& steps) {
  struct NamedShape {
    Shape shape;
    const char* name;
    bool core;  // in the core tier too
  };
  const NamedShape shapes[] = {{{2, 4, 2, 1013, 1013, true}, "GQA_Sq1013_causal", true},
                               {{1, 2, 2, 300, 77, false}, "Sq300_Sk77", true},
                               {{1, 2, 1, 127, 300, true}, "MQA_Sq127_Sk300_causal", false},
                               {{3, 2, 2, 77, 1013, false}, "Sq77_Sk1013", false}};
  const bool full = test_tier() == Tier::full;
  std::vector<BackwardCase> cases;
  for (const BackwardStep& step : steps)
    for (Dtype dtype : step.chapter.support.dtypes)
      for (int d : step.chapter.test_head_dims)
        for (const NamedShape& s : shapes) {
          if (!full && !s.core) continue;
          cases.push_back({.chapter = &step.chapter,
                           .problem = problem_of(s.shape, d, dtype),
                           .name = step.name + "_D" + std::to_string(d) + "_" + s.name + "_" + dtype_name(dtype)});
        }
  return cases;
}

std::vector<BackwardRefusalCase> backward_refusal_cases(const BackwardChapter& chapter) {
  std::vector<BackwardRefusalCase> cases;
  for (BadProblem& b : bad_problems(chapter.support, chapter.defaults))
    cases.push_back({.chapter = &chapter, .problem = b.problem, .null_tensor = "", .expect = b.expect, .name = b.name});
  Problem valid = chapter.defaults;
  valid.dtype = chapter.support.dtypes.front();
  for (const char* tensor : {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"})
    cases.push_back({.chapter = &chapter, .problem = valid, .null_tensor = tensor, .expect = "null",
                      .name = std::string("Null_") + tensor});
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

void upload_forward_outputs(const Problem& p, const HostInputs& in, cuda::DeviceBuffer& o, cuda::DeviceBuffer& lse,
                            const VisibleFn& visible) {
  const ReferenceForward ref = p.dtype == Dtype::f32 ? fp32_score_forward(p, in.q, in.k, in.v, visible)
                                                     : same_precision_forward(p, in.q, in.k, in.v, visible);
  // bshd: [B, S, H, D]; varlen: [1, total_q, H, D], LSE [1, H, total_q]
  o.upload(to_layout(encode(std::vector<float>(ref.o.begin(), ref.o.end()), p.dtype), p, Operand::o));
  const std::vector<float> lse_host(ref.lse.begin(), ref.lse.end());
  lse.upload(lse_host.data(), lse_host.size() * sizeof(float));
}

void check_backward(const BackwardCase& c) {
  const std::string reason = unavailable_reason(c.chapter->support);
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const Problem& p = c.problem;
  const std::uint64_t seed = seed_of(c.name);
  const HostInputs in = make_inputs(p, seed, c.inputs);
  const std::vector<float> dout_host = make_dout(p, seed);
  const std::size_t elem = dtype_size(p.dtype);

  cuda::DeviceBuffer o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * elem);
  cuda::DeviceBuffer dq(p.q_elems() * elem + kGuardBytes), dk(p.kv_elems() * elem + kGuardBytes),
      dv(p.kv_elems() * elem + kGuardBytes);
  // Q, K, V, dO (and O) in the problem's layout (a varlen batch: [1, total, H, D], its sequences
  // one after another), Q, K, V perhaps as the slices of one fused QKV buffer (input strides; the
  // gradients are still written in the layout); the gradients come back to [B, H, S, D] for the
  // check, which takes a varlen problem's yardsticks sequence by sequence.
  const DeviceInputs inputs = upload_inputs(p, in);
  dout.upload(to_layout(encode(dout_host, p.dtype), p, Operand::o));

  const cuda::Stream stream;  // everything on a non-blocking stream, as PyTorch runs it
  if (c.chapter->tests_own_forward != nullptr && c.chapter->tests_own_forward(p)) {
    o.poison(stream.get());
    lse.poison(stream.get());
    c.chapter->forward(p, inputs.q, inputs.k, inputs.v, o.get(), lse.as<float>(), stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  } else {
    upload_forward_outputs(p, in, o, lse);
  }
  struct Gradients {
    std::vector<std::uint8_t> dq, dk, dv;
  };
  auto run = [&](BackwardFn backward) {
    dq.poison(stream.get());
    dk.poison(stream.get());
    dv.poison(stream.get());
    backward(p, inputs.q, inputs.k, inputs.v, o.get(), lse.as<float>(), dout.get(), dq.get(), dk.get(), dv.get(), stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    return Gradients{from_layout(download_guarded(dq, "dQ"), p, Operand::q),
                     from_layout(download_guarded(dk, "dK"), p, Operand::k),
                     from_layout(download_guarded(dv, "dV"), p, Operand::v)};
  };
  const std::string what = p.describe() + " (" + input_kind_name(c.inputs) + " inputs)";

  const Gradients first = run(c.chapter->backward), second = run(c.chapter->backward);
  const BackwardYardsticks yardsticks = backward_yardsticks(p, in, dout_host);  // once for both modes
  const BackwardCheck check = fa::check_backward(p, yardsticks, first.dq, first.dk, first.dv);
  EXPECT_TRUE(check.pass()) << what << "\n" << check.summary();
  if (verbose()) std::cout << what << "\n" << check.summary() << "\n";
  EXPECT_TRUE(first.dk == second.dk) << "dK differs between two identical calls: " << what;
  EXPECT_TRUE(first.dv == second.dv) << "dV differs between two identical calls: " << what;

  if (c.chapter->deterministic == nullptr) return;
  Gradients det[2];
  try {
    det[0] = run(c.chapter->deterministic);
  } catch (const std::invalid_argument& e) {
    // The chapter has no deterministic mode for this dtype; its refusal is tested on its own.
    EXPECT_NE(std::string(e.what()).find("deterministic"), std::string::npos) << e.what();
    return;
  }
  det[1] = run(c.chapter->deterministic);
  const BackwardCheck det_check = fa::check_backward(p, yardsticks, det[0].dq, det[0].dk, det[0].dv);
  EXPECT_TRUE(det_check.pass()) << "deterministic mode: " << what << "\n" << det_check.summary();
  EXPECT_TRUE(det[0].dq == det[1].dq && det[0].dk == det[1].dk && det[0].dv == det[1].dv)
      << "the deterministic mode gave different bits in two identical calls: " << what;
}

}  // namespace fa::testing
