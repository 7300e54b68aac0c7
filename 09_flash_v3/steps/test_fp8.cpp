// The step v6_fp8 (steps/fp8.h) against the float64 reference on the values its E4M3 inputs stand
// for, by FP8's same-precision rule (common/host/fp8.h: fp8_plain_forward says why that rule),
// on awkward shapes; and its refusals. ctest -L 09_flash_v3
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "09_flash_v3/steps/fp8.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/harness/test_cases.h"  // seed_of, kGuardBytes, download_guarded, verbose
#include "common/host/forward_check.h"
#include "common/host/fp8.h"

namespace {

struct Fp8Case {
  std::string name;
  int batch, heads, kv_heads, seqlen_q, seqlen_k;
  bool causal;
  fa::InputKind inputs = fa::InputKind::normal;
};

void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.name; }

fa::Problem problem_of(const Fp8Case& c) {
  fa::Problem p;
  p.batch = c.batch, p.heads = c.heads, p.kv_heads = c.kv_heads;
  p.seqlen_q = c.seqlen_q, p.seqlen_k = c.seqlen_k, p.head_dim = 128, p.causal = c.causal;
  p.dtype = fa::Dtype::f16;  // O's
  return p;
}

// One tensor's E4M3 bytes on the device.
fa::cuda::DeviceBuffer upload(const fa::E4m3Tensor& t) {
  fa::cuda::DeviceBuffer b(t.bits.size());
  FA_CUDA_CHECK(cudaMemcpy(b.get(), t.bits.data(), t.bits.size(), cudaMemcpyHostToDevice));
  return b;
}

class Fp8Forward : public ::testing::TestWithParam<Fp8Case> {};

// Seeded inputs (of the shared kinds, test_cases.h) quantized per tensor, the kernel run twice
// with its outputs poisoned first (guard bytes after each): the first run by the rule, the second
// the same bits.
TEST_P(Fp8Forward, MatchesTheReferenceByTheFp8Rule) {
  const std::string reason = fa::unavailable_reason(flash_v3::steps::fp8_support());
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const Fp8Case& c = GetParam();
  const fa::Problem p = problem_of(c);
  const fa::HostInputs raw = fa::make_inputs(p, fa::testing::seed_of("fp8/" + c.name), c.inputs);
  const fa::E4m3Tensor q8 = fa::quantize_e4m3(raw.q), k8 = fa::quantize_e4m3(raw.k), v8 = fa::quantize_e4m3(raw.v);
  const fa::HostInputs in{fa::dequantize(q8), fa::dequantize(k8), fa::dequantize(v8)};
  const fa::cuda::DeviceBuffer q = upload(q8), k = upload(k8), v = upload(v8);
  fa::cuda::DeviceBuffer o(p.o_elems() * 2 + fa::testing::kGuardBytes),
      lse(p.lse_elems() * sizeof(float) + fa::testing::kGuardBytes);
  const fa::cuda::Stream stream;
  std::vector<std::uint8_t> runs[2][2];  // [run][O, LSE]
  for (auto& run : runs) {
    o.poison(stream.get());
    lse.poison(stream.get());
    flash_v3::steps::forward_fp8(p, q.get(), k.get(), v.get(), {q8.scale, k8.scale, v8.scale}, o.get(),
                                 lse.as<float>(), stream.get());
    FA_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    run[0] = fa::testing::download_guarded(o, "O");
    run[1] = fa::testing::download_guarded(lse, "LSE");
  }
  const fa::ForwardCheck check = fa::check_forward_fp8(p, in, runs[0][0], runs[0][1]);
  EXPECT_TRUE(check.pass()) << p.describe() << " (" << fa::input_kind_name(c.inputs) << " inputs)\n" << check.summary();
  if (fa::testing::verbose()) std::cout << p.describe() << "\n" << check.summary() << "\n";
  EXPECT_TRUE(runs[0][0] == runs[1][0]) << "O differs between two identical calls";
  EXPECT_TRUE(runs[0][1] == runs[1][1]) << "LSE differs between two identical calls";
}

// Tiles cut by the ends (77 x 131), rows and whole tiles that see no key (300 x 77 causal), one
// query, GQA and MQA, a K/V longer than its queries, V^T's padding (Sk not a multiple of 32), a
// long causal row walk, blocks that walk many tiles (the ring's stages reused across tiles), and
// the hard inputs whose running max jumps late or whose scores are large.
INSTANTIATE_TEST_SUITE_P(
    V6Fp8, Fp8Forward,
    ::testing::Values(Fp8Case{"mha_128", 1, 2, 2, 128, 128, false},
                      Fp8Case{"gqa_77x131_causal", 2, 4, 2, 77, 131, true},
                      Fp8Case{"mqa_1000_causal", 1, 2, 1, 1000, 1000, true},
                      Fp8Case{"full_512x2050", 1, 2, 2, 512, 2050, false},
                      Fp8Case{"one_query_300", 1, 2, 2, 1, 300, false},
                      Fp8Case{"no_keys_300x77_causal", 1, 2, 2, 300, 77, true},
                      Fp8Case{"long_4096_causal", 1, 1, 1, 4096, 4096, true},
                      Fp8Case{"many_tiles_4x16x1100", 4, 16, 8, 1100, 1100, false},
                      Fp8Case{"rare_spikes_1013", 1, 2, 2, 1013, 1013, false, fa::InputKind::rare_spikes},
                      Fp8Case{"large_logits_256_causal", 1, 2, 2, 256, 256, true, fa::InputKind::large_logits}),
    [](const ::testing::TestParamInfo<Fp8Case>& info) { return info.param.name; });

// What it does not take is refused before anything runs (no GPU needed): the pointers are never read.
TEST(V6Fp8Refusals, NamesWhatItDoesNotTake) {
  auto* fake = reinterpret_cast<void*>(std::uintptr_t{1} << 20);
  auto refused = [&](const fa::Problem& p, flash_v3::steps::Fp8Scales s, const std::string& word) {
    try {
      flash_v3::steps::forward_fp8(p, fake, fake, fake, s, fake, static_cast<float*>(fake), nullptr);
      ADD_FAILURE() << "not refused: " << p.describe() << " (expected '" << word << "')";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what() << " (expected '" << word << "')";
    }
  };
  const fa::Problem ok = problem_of({"ok", 1, 2, 2, 256, 256, false});
  fa::Problem p = ok;
  p.head_dim = 64;
  refused(p, {}, "head_dim");
  p = ok;
  p.dtype = fa::Dtype::bf16;
  refused(p, {}, "dtype");
  p = ok;
  p.window_left = 64;
  refused(p, {}, "window");
  p = ok;
  p.layout = fa::Layout::bshd;
  refused(p, {}, "bshd");
  refused(ok, {1.0f, 0.0f, 1.0f}, "scales");
  refused(ok, {1.0f, 1.0f, std::numeric_limits<float>::infinity()}, "scales");
}

}  // namespace
