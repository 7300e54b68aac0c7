#include "common/harness/test_harness.h"

#include "common/host/forward_check.h"
#include "common/harness/test_cases.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"

#include <iostream>

namespace fa::testing {

std::vector<ForwardCase> forward_cases(const Chapter& chapter) {
  std::vector<ForwardCase> cases;
  for (NamedProblem& c : sweep(chapter.support, chapter.test_head_dims))
    cases.push_back({.chapter = &chapter, .problem = c.problem, .name = c.name, .inputs = c.inputs});
  return cases;
}

std::vector<ForwardCase> step_cases(const std::vector<Step>& steps) {
  struct NamedShape {
    Shape shape;
    const char* name;
    bool core;  // in the core tier too
  };
  const NamedShape shapes[] = {{{2, 4, 2, 1013, 1013, true}, "GQA_Sq1013_causal", true},
                               {{1, 2, 1, 127, 300, false}, "MQA_Sq127_Sk300", false},
                               {{1, 2, 2, 300, 77, true}, "Sq300_Sk77_causal", true},
                               {{3, 2, 2, 1, 1013, true}, "Sq1_Sk1013_causal", false}};
  const bool full = test_tier() == Tier::full;
  std::vector<ForwardCase> cases;
  for (const Step& step : steps) {
    for (Dtype dtype : step.chapter.support.dtypes) {  // the first dtype unnamed: "v2_swizzle_D64_..."
      const bool first = dtype == step.chapter.support.dtypes.front();
      const std::string suffix = first ? std::string() : std::string("_") + dtype_name(dtype);
      for (int d : step.chapter.test_head_dims) {
        for (const NamedShape& s : shapes) {
          if (!full && !s.core) continue;
          Problem p = problem_of(s.shape, d, dtype);
          p.head_dim_v = step.chapter.support.head_dim_v;  // a step with V's head dim of its own (06's MLA step)
          cases.push_back({.chapter = &step.chapter,
                           .problem = p,
                           .name = step.name + "_D" + std::to_string(d) + "_" + s.name + suffix});
        }
      }
    }
  }
  return cases;
}

std::vector<RefusalCase> refusal_cases(const Chapter& chapter) {
  std::vector<RefusalCase> cases;
  for (BadProblem& b : bad_problems(chapter.support, chapter.defaults))
    cases.push_back(
        {.chapter = &chapter, .problem = b.problem, .null_output = false, .expect = b.expect, .name = b.name});
  Problem valid = chapter.defaults;
  valid.dtype = chapter.support.dtypes.front();
  cases.push_back(
      {.chapter = &chapter, .problem = valid, .null_output = true, .expect = "null", .name = "NullOutput"});
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
  const std::string reason = unavailable_reason(c.chapter->support);
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const Problem& p = c.problem;
  const HostInputs in = make_inputs(p, seed_of(c.name), c.inputs);
  const std::size_t elem = dtype_size(p.dtype);

  cuda::DeviceBuffer o(p.o_elems() * elem + kGuardBytes), lse(p.lse_elems() * sizeof(float) + kGuardBytes);
  // Q, K, V in the problem's layout (a varlen batch: [1, total, H, D], its sequences one after
  // another), or as the slices of one fused QKV buffer (input strides); O comes back to
  // [B, H, S, D] for the check, which takes a varlen problem's reference sequence by sequence.
  const DeviceInputs inputs = upload_inputs(p, in);

  // A non-blocking stream, as PyTorch uses: nothing the legacy default stream does orders it.
  const cuda::Stream stream;
  std::vector<std::uint8_t> runs[2][2];  // [run][O, LSE]
  for (auto& run : runs) {
    o.poison(stream.get());
    lse.poison(stream.get());
    c.chapter->forward(p, inputs.q, inputs.k, inputs.v, o.get(), lse.as<float>(), stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    run[0] = from_layout(download_guarded(o, "O"), p, Operand::o);
    run[1] = download_guarded(lse, "LSE");
  }

  const ForwardCheck check = fa::check_forward(p, in, runs[0][0], runs[0][1]);
  EXPECT_TRUE(check.pass()) << p.describe() << " (" << input_kind_name(c.inputs) << " inputs)\n" << check.summary();
  if (verbose()) std::cout << p.describe() << " (" << input_kind_name(c.inputs) << " inputs)\n" << check.summary() << "\n";
  EXPECT_TRUE(runs[0][0] == runs[1][0]) << "O differs between two identical calls (" << p.describe() << ")";
  EXPECT_TRUE(runs[0][1] == runs[1][1]) << "LSE differs between two identical calls (" << p.describe() << ")";
}

}  // namespace fa::testing
