// Chapter 11's backward against the float64 reference on the shared shapes (08's backward harness:
// seqlen 1 .. 1013, Sq != Sk both ways, MHA / GQA / MQA, causal and not, the hard inputs, the
// long-context large-logit cases and grids past 65,535 blocks), bf16 and f16 at head dims 64, 96
// and 128, and the fp32-gradient mode (backward_f32): ctest -L 11_backward_v3. The GPU cases skip,
// saying why, on a GPU other than Hopper.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "08_backward/harness/backward_harness.h"
#include "11_backward_v3/backward_v3.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/host_data.h"

FA_BACKWARD_TESTS(backward_v3::chapter());

// Walks longer than Config::kFlushSteps steps, whose dK and dV go through the fp32 sums in global
// memory (flush_key_grads): 257 steps of 128 rows at D = 64 (a flush, then one more step), exactly
// 256 steps of 64 rows at D = 128 (the flush at the last step), and a GQA group of 8 query heads
// whose first key tile walks 264 steps and second 24 (causal, Sq > Sk). The shared verdict, the
// deterministic mode included.
namespace {

std::vector<fa::testing::BackwardCase> long_walk_cases() {
  struct Long {
    int heads, kv_heads, seqlen_q, seqlen_k, head_dim;
    bool causal;
    fa::Dtype dtype;
  };
  const Long longs[] = {{1, 1, 257 * 128, 2, 64, false, fa::Dtype::bf16},
                        {1, 1, 256 * 64, 200, 128, false, fa::Dtype::f16},
                        {8, 1, 2100, 300, 128, true, fa::Dtype::bf16}};
  std::vector<fa::testing::BackwardCase> cases;
  for (const Long& l : longs) {
    fa::Problem p = fa::default_problem(l.dtype);
    p.batch = 1, p.heads = l.heads, p.kv_heads = l.kv_heads, p.seqlen_q = l.seqlen_q, p.seqlen_k = l.seqlen_k;
    p.head_dim = l.head_dim, p.causal = l.causal;
    const std::string name = "H" + std::to_string(l.heads) + "x" + std::to_string(l.kv_heads) + "_Sq" +
                             std::to_string(l.seqlen_q) + "_Sk" + std::to_string(l.seqlen_k) + "_D" +
                             std::to_string(l.head_dim) + (l.causal ? "_causal_" : "_") + fa::dtype_name(l.dtype);
    cases.push_back({.chapter = &backward_v3::chapter(), .problem = p, .name = name});
  }
  return cases;
}

class LongWalks : public ::testing::TestWithParam<fa::testing::BackwardCase> {};
TEST_P(LongWalks, MatchesReference) { fa::testing::check_backward(GetParam()); }
INSTANTIATE_TEST_SUITE_P(FlushedSums, LongWalks, ::testing::ValuesIn(long_walk_cases()), fa::testing::CaseName{});

// backward_f32 (dQ, dK and dV as unrounded floats, for callers that sum the parts of several
// backwards: chapter 12's ring) through the same verdict. Its floats land in buffers poisoned
// first (kPoisonByte: NaN as a float), are rounded to the dtype here on the host, and go where the
// harness reads the chapter's outputs: an element it leaves unwritten comes out NaN and fails.
// The shapes: GQA at seqlen 1013 (partial tiles at both ends), causal and full, a sliding window,
// and the long GQA walk whose dK and dV go through the fp32 sums (flush_key_grads).
void round_into(const fa::cuda::DeviceBuffer& floats, void* out, std::int64_t n, fa::Dtype dtype) {
  std::vector<float> host(n);
  FA_CUDA_CHECK(cudaMemcpy(host.data(), floats.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  const std::vector<std::uint8_t> bytes = fa::encode(host, dtype);
  FA_CUDA_CHECK(cudaMemcpy(out, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}
void backward_via_f32(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                      const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  fa::cuda::DeviceBuffer f_dq(p.q_elems() * sizeof(float)), f_dk(p.kv_elems() * sizeof(float)),
      f_dv(p.kv_elems() * sizeof(float));
  for (const fa::cuda::DeviceBuffer* b : {&f_dq, &f_dk, &f_dv})
    FA_CUDA_CHECK(cudaMemsetAsync(b->get(), fa::kPoisonByte, b->bytes(), stream));
  backward_v3::backward_f32(p, q, k, v, o, lse, dout, static_cast<float*>(f_dq.get()),
                            static_cast<float*>(f_dk.get()), static_cast<float*>(f_dv.get()), stream);
  FA_CUDA_CHECK(cudaStreamSynchronize(stream));
  round_into(f_dq, dq, p.q_elems(), p.dtype);
  round_into(f_dk, dk, p.kv_elems(), p.dtype);
  round_into(f_dv, dv, p.kv_elems(), p.dtype);
}
const fa::BackwardChapter& f32_chapter() {
  static const fa::BackwardChapter c = [] {
    fa::BackwardChapter f = backward_v3::chapter();
    f.backward = backward_via_f32;
    f.deterministic = nullptr;
    return f;
  }();
  return c;
}

std::vector<fa::testing::BackwardCase> f32_cases() {
  std::vector<fa::testing::BackwardCase> cases;
  for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
    for (int d : {64, 96, 128})
      for (int mask = 0; mask < 3; ++mask) {  // full, causal, a window of 100 keys to the left
        fa::Problem p = fa::default_problem(dtype);
        p.batch = 2, p.heads = 4, p.kv_heads = 2, p.seqlen_q = p.seqlen_k = 1013, p.head_dim = d;
        p.causal = mask == 1;
        if (mask == 2) p.window_left = 100, p.window_right = 0;
        const char* masks[] = {"full", "causal", "window100"};
        cases.push_back({.chapter = &f32_chapter(), .problem = p,
                         .name = std::string(fa::dtype_name(dtype)) + "_D" + std::to_string(d) + "_" + masks[mask]});
      }
  fa::Problem p = fa::default_problem(fa::Dtype::bf16);  // the long walk: 264 steps on the first key tile
  p.batch = 1, p.heads = 8, p.kv_heads = 1, p.seqlen_q = 2100, p.seqlen_k = 300, p.head_dim = 128, p.causal = true;
  cases.push_back({.chapter = &f32_chapter(), .problem = p, .name = "H8x1_Sq2100_Sk300_D128_causal_bf16"});
  return cases;
}

class F32Grads : public ::testing::TestWithParam<fa::testing::BackwardCase> {};
TEST_P(F32Grads, MatchesReference) { fa::testing::check_backward(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Unrounded, F32Grads, ::testing::ValuesIn(f32_cases()), fa::testing::CaseName{});

}  // namespace
