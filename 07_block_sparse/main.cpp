// Chapter 07's executable: one block-sparse forward pass with a generated mask, checked against
// the float64 reference given the same mask, and timed.
//   ./07_block_sparse --seqlen 8192 --head-dim 128 --pattern random --density 0.25 --block-k 128
//   ./07_block_sparse --help
#include <cstdio>
#include <exception>
#include <optional>
#include <sstream>
#include <string>

#include "07_block_sparse/block_sparse.h"
#include "07_block_sparse/mask_flags.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/gpu_timer.h"
#include "common/host/host_data.h"
#include "07_block_sparse/masked_check.h"
#include "common/harness/runner.h"

namespace {

namespace bs = block_sparse;

int run(const fa::Options& o, const bs::MaskOptions& m) {
  const fa::Problem& p = o.problem;
  // Refuse unsupported problems and masks first: before looking for a GPU or drawing inputs.
  fa::check_forward_args(bs::chapter().support, p, &p, &p, &p, &p, &p);
  const bs::BlockMask mask = bs::make_mask(p, m.block_k, {m.pattern});
  fa::require_gpu();
  const fa::HostInputs in = fa::make_inputs(p, o.seed);
  const std::size_t elem = fa::dtype_size(p.dtype);
  const bs::DeviceBlockMask device_mask(mask);
  fa::cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      out(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float));
  // Q, K, V in the problem's layout (--layout bshd: [B, S, H, D]); O comes back for the check.
  q.upload(fa::to_layout(fa::encode(in.q, p.dtype), p, fa::Operand::q));
  k.upload(fa::to_layout(fa::encode(in.k, p.dtype), p, fa::Operand::k));
  v.upload(fa::to_layout(fa::encode(in.v, p.dtype), p, fa::Operand::v));
  out.poison();
  lse.poison();
  auto forward = [&] { bs::forward(p, device_mask, q.get(), k.get(), v.get(), out.get(), lse.as<float>(), nullptr); };
  forward();  // the checked run: the first one, on poisoned outputs
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  std::optional<fa::ForwardCheck> check;
  if (o.check)
    check = fa::check_forward_masked(p, in, fa::from_layout(out.download(), p, fa::Operand::o), lse.download(),
                                     bs::visible_fn(mask));
  const bool pass = !check || check->pass();
  const float ms = fa::cuda::median_ms(forward, o.iters);
  const double tflops = bs::forward_flops(p, mask) / (ms * 1e-3) / 1e12;

  std::printf("07_block_sparse    %s | %s %.3f, blocks 128 x %d | %s | %9.3f ms %8.2f TFLOP/s (active blocks)\n",
              p.describe().c_str(), bs::pattern_name(m.pattern.pattern), mask.density(), m.block_k,
              o.check ? (pass ? "PASS" : "FAIL") : "unchecked", ms, tflops);
  if (check) std::printf("%s\n", check->summary().c_str());
  if (o.json) {
    cudaDeviceProp prop{};
    int device = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    std::ostringstream s;
    s << "{\"chapter\":\"07_block_sparse\",\"gpu\":\"" << prop.name << "\",\"batch\":" << p.batch << ",\"heads\":" << p.heads
      << ",\"kv_heads\":" << p.kv_heads << ",\"seqlen_q\":" << p.seqlen_q << ",\"seqlen_k\":" << p.seqlen_k
      << ",\"head_dim\":" << p.head_dim << ",\"causal\":" << (p.causal ? "true" : "false") << ",\"dtype\":\""
      << fa::dtype_name(p.dtype) << "\",\"pattern\":\"" << bs::pattern_name(m.pattern.pattern)
      << "\",\"block_k\":" << m.block_k << ",\"density\":" << mask.density()
      << ",\"checked\":" << (check ? "true" : "false") << ",\"pass\":" << (pass ? "true" : "false");
    if (check) s << ",\"max_abs_err\":" << check->o.max_abs << ",\"lse_max_abs_err\":" << check->lse.max_abs;
    s << ",\"ms\":" << ms << ",\"tflops\":" << tflops << "}";
    std::printf("%s\n", s.str().c_str());
  }
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const fa::Chapter& chapter = bs::chapter();
  const fa::Help help{.chapter = chapter.support.chapter,
                      .runs = "runs one block-sparse attention forward pass with a generated mask, checks it against "
                              "the CPU reference under the same mask and times it.",
                      .supports = {chapter.support},
                      .defaults = chapter.defaults,
                      .chapter_flags = bs::kMaskFlagsHelp};
  bs::MaskOptions mask;
  try {
    mask = bs::take_mask_flags(argc, argv);
  } catch (const std::exception& e) {
    return fa::report_error(help.chapter, e);
  }
  return fa::run_main(help, argc, argv, [&](const fa::Options& o) { return run(o, mask); });
}
