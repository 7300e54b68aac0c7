// Chapter 08's backward against the float64 reference on the shared shapes: ctest -L 08_backward
//   Backward:      f32, f16, bf16 at head dims 8 .. 256, multiples of 8 (f32 up to 128: the 3xTF32
//                  pair, its O and LSE from its own forward; above: the FFMA kernel)
//   BackwardFp32:  the FFMA kernel alone (7, 32, 64, 96, 128, 160, 256)
//   BackwardTf32x3: the 3xTF32 pair alone at head dims no multiple of 8 (37, 100)
//   Deterministic: the f16/bf16 deterministic mode, twice, byte for byte, and against the reference
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "08_backward/backward.h"
#include "08_backward/harness/backward_check.h"
#include "08_backward/harness/backward_harness.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/host_data.h"
#include "common/harness/test_cases.h"

FA_BACKWARD_TESTS(backward::chapter());
FA_BACKWARD_TESTS_NAMED(BackwardFp32, backward::fp32_chapter());
FA_BACKWARD_TESTS_NAMED(BackwardTf32x3, backward::tf32x3_chapter());
// The f32 pair's forward up to D = 128 (backward.h: fp32_on_tensor_cores) is 05's chapter
// forward there, which 05's tests run on the chapter forward suite (the large-logit inputs among
// them).

namespace {

using fa::testing::BackwardRefusalCase;

// The tensor-core path's own refusals, which the chapter's Support cannot express. No GPU needed.
std::vector<BackwardRefusalCase> tensor_core_refusals() {
  std::vector<BackwardRefusalCase> cases;
  for (fa::Dtype dtype : {fa::Dtype::f16, fa::Dtype::bf16}) {
    for (int d : {36, 100}) {  // not a multiple of 8 (the fp32 kernel takes both)
      fa::Problem p = backward::chapter().defaults;
      p.dtype = dtype;
      p.head_dim = d;
      cases.push_back({.chapter = &backward::chapter(),
                       .problem = p,
                       .null_tensor = "",
                       .expect = "head_dim",
                       .name = std::string(fa::dtype_name(dtype)) + "_D" + std::to_string(d)});
    }
  }
  return cases;
}

class TensorCoreRefuses : public ::testing::TestWithParam<BackwardRefusalCase> {};
TEST_P(TensorCoreRefuses, BadInput) { fa::testing::check_backward_refusal(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Inputs, TensorCoreRefuses, ::testing::ValuesIn(tensor_core_refusals()),
                         fa::testing::CaseName{});

TEST(InputsDeterministic, F32IsRefused) {
  fa::Problem p = backward::chapter().defaults;
  p.dtype = fa::Dtype::f32;
  static float dummy[4];
  EXPECT_THROW(backward::backward(p, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, nullptr,
                                  backward::BackwardOptions{.deterministic = true}),
               std::invalid_argument);
}

struct DetCase {
  fa::Problem problem;
  std::string name;
};
void PrintTo(const DetCase& c, std::ostream* os) { *os << c.name; }

std::vector<DetCase> deterministic_cases() {
  std::vector<DetCase> cases;
  struct Shape { int batch, heads, kv_heads, seqlen_q, seqlen_k; bool causal; };
  // Many key tiles per query tile (the order matters), GQA, causal with Sq != Sk, partial tiles.
  for (const Shape& s : {Shape{1, 4, 2, 1013, 1013, true}, Shape{2, 2, 1, 300, 517, false}}) {
    for (fa::Dtype dtype : {fa::Dtype::f16, fa::Dtype::bf16}) {
      for (int d : {40, 64, 96, 128, 200, 256}) {  // 40, 200: padded tiles; 256: Bc = 64
        fa::Problem p;
        p.batch = s.batch, p.heads = s.heads, p.kv_heads = s.kv_heads;
        p.seqlen_q = s.seqlen_q, p.seqlen_k = s.seqlen_k, p.head_dim = d, p.causal = s.causal, p.dtype = dtype;
        cases.push_back({p, "Sq" + std::to_string(s.seqlen_q) + "_Sk" + std::to_string(s.seqlen_k) + "_D" +
                                std::to_string(d) + (s.causal ? "_causal_" : "_") + fa::dtype_name(dtype)});
      }
    }
  }
  return cases;
}

class Deterministic : public ::testing::TestWithParam<DetCase> {};

// Runs the deterministic backward twice on poisoned outputs: dQ, dK, dV must match byte for byte,
// and pass the same check as the default mode.
TEST_P(Deterministic, BitwiseIdenticalAndCorrect) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  namespace cuda = fa::cuda;
  const fa::Problem& p = GetParam().problem;
  const std::uint64_t seed = fa::testing::seed_of(GetParam().name);
  const fa::HostInputs in = fa::make_inputs(p, seed);
  const std::vector<float> dout_host = fa::make_dout(p, seed);
  const std::size_t elem = fa::dtype_size(p.dtype);
  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * elem);
  q.upload(fa::encode(in.q, p.dtype));
  k.upload(fa::encode(in.k, p.dtype));
  v.upload(fa::encode(in.v, p.dtype));
  dout.upload(fa::encode(dout_host, p.dtype));
  fa::testing::upload_forward_outputs(p, in, o, lse);  // O and LSE from the CPU, not from 06's forward

  std::vector<std::uint8_t> runs[2][3];  // [run][dQ, dK, dV]
  for (auto& run : runs) {
    cuda::DeviceBuffer dq(p.q_elems() * elem), dk(p.kv_elems() * elem), dv(p.kv_elems() * elem);
    dq.poison();
    dk.poison();
    dv.poison();
    backward::backward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), dout.get(), dq.get(), dk.get(),
                       dv.get(), nullptr, backward::BackwardOptions{.deterministic = true});
    FA_CUDA_CHECK(cudaDeviceSynchronize());
    run[0] = dq.download();
    run[1] = dk.download();
    run[2] = dv.download();
  }
  const char* names[3] = {"dQ", "dK", "dV"};
  for (int t = 0; t < 3; ++t) EXPECT_TRUE(runs[0][t] == runs[1][t]) << names[t] << " differs between two runs";
  const fa::BackwardCheck check = fa::check_backward(p, in, dout_host, runs[0][0], runs[0][1], runs[0][2]);
  EXPECT_TRUE(check.pass()) << p.describe() << "\n" << check.summary();
}

INSTANTIATE_TEST_SUITE_P(Shapes, Deterministic, ::testing::ValuesIn(deterministic_cases()),
                         [](const ::testing::TestParamInfo<DetCase>& info) { return info.param.name; });

}  // namespace
