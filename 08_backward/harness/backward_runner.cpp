#include "08_backward/harness/backward_runner.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "08_backward/harness/backward_check.h"
#include "common/host/cli.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/forward_check.h"
#include "common/cuda/gpu_timer.h"
#include "common/host/host_data.h"
#include "common/harness/runner.h"

namespace fa {
namespace {

struct Timings {
  float fwd_ms, bwd_ms;
  std::size_t peak, scratch;
};

std::string json_line(const BackwardChapter& c, const Options& o, bool deterministic, bool pass,
                      const ForwardCheck* fwd, const BackwardCheck* bwd, const Timings& t) {
  const Problem& p = o.problem;
  std::ostringstream s;
  s.precision(6);
  s << json_problem_fields(c.support.chapter, p) << ",\"deterministic\":" << (deterministic ? "true" : "false")
    << ",\"checked\":" << (fwd ? "true" : "false") << ",\"pass\":" << (pass ? "true" : "false");
  if (fwd) s << ",\"max_abs_err\":" << fwd->o.max_abs << ",\"lse_max_abs_err\":" << fwd->lse.max_abs;
  if (bwd) {
    s << ",\"dq_max_abs_err\":" << bwd->dq.max_abs << ",\"dk_max_abs_err\":" << bwd->dk.max_abs
      << ",\"dv_max_abs_err\":" << bwd->dv.max_abs << ",\"dq_rel_fro_err\":" << bwd->dq.rel_fro
      << ",\"dk_rel_fro_err\":" << bwd->dk.rel_fro << ",\"dv_rel_fro_err\":" << bwd->dv.rel_fro;
  }
  s << ",\"fwd_ms\":" << t.fwd_ms << ",\"fwd_tflops\":" << forward_flops(p) / (t.fwd_ms * 1e-3) / 1e12
    << ",\"bwd_ms\":" << t.bwd_ms << ",\"bwd_tflops\":" << backward_flops(p) / (t.bwd_ms * 1e-3) / 1e12
    << ",\"peak_mem_bytes\":" << t.peak << ",\"workspace_bytes\":" << t.scratch << "}";
  return s.str();
}

int run(const BackwardChapter& c, const std::vector<Support>& tables, const Options& o, bool deterministic) {
  const Problem& p = o.problem;
  const BackwardFn backward_fn = deterministic ? c.deterministic : c.backward;
  // Refuse unsupported problems first: before looking for a GPU or drawing inputs.
  check_backward_args(c.support, p, &p, &p, &p, &p, &p, &p, &p, &p, &p);
  for (const Support& table : tables) {
    if (std::find(table.dtypes.begin(), table.dtypes.end(), p.dtype) == table.dtypes.end()) continue;
    try {
      check_forward_args(table, p, &p, &p, &p, &p, &p);  // the head dims of p's dtype
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(e.what()) + " with dtype " + dtype_name(p.dtype));
    }
  }
  require_gpu();

  const HostInputs in = make_inputs(p, o.seed);
  const std::vector<float> dout_host = make_dout(p, o.seed);
  const std::size_t elem = dtype_size(p.dtype);
  cuda::release_workspace();
  cuda::reset_peak();
  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      out(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * elem),
      dq(p.q_elems() * elem), dk(p.kv_elems() * elem), dv(p.kv_elems() * elem);
  // Q, K, V, dO in the problem's layout (bshd: [B, S, H, D]); O and the gradients come back to
  // [B, H, S, D] for the checks.
  q.upload(to_layout(encode(in.q, p.dtype), p, Operand::q));
  k.upload(to_layout(encode(in.k, p.dtype), p, Operand::k));
  v.upload(to_layout(encode(in.v, p.dtype), p, Operand::v));
  dout.upload(to_layout(encode(dout_host, p.dtype), p, Operand::o));
  for (cuda::DeviceBuffer* b : {&out, &lse, &dq, &dk, &dv}) b->poison();

  auto forward = [&] { c.forward(p, q.get(), k.get(), v.get(), out.get(), lse.as<float>(), nullptr); };
  auto backward = [&] {
    backward_fn(p, q.get(), k.get(), v.get(), out.get(), lse.as<float>(), dout.get(), dq.get(), dk.get(),
                dv.get(), nullptr);
  };
  forward();  // the checked runs: the first ones, on poisoned outputs
  backward();
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  std::optional<ForwardCheck> fwd_check;
  std::optional<BackwardCheck> bwd_check;
  if (o.check) {
    fwd_check = check_forward(p, in, from_layout(out.download(), p, Operand::o), lse.download());
    bwd_check = check_backward(p, in, dout_host, from_layout(dq.download(), p, Operand::q),
                               from_layout(dk.download(), p, Operand::k), from_layout(dv.download(), p, Operand::v));
  }
  const bool fwd_pass = !fwd_check || fwd_check->pass(), bwd_pass = !bwd_check || bwd_check->pass();

  Timings t{};
  t.fwd_ms = cuda::median_ms(forward, o.iters);
  t.bwd_ms = cuda::median_ms(backward, o.iters);
  const cuda::MemoryStats mem = cuda::memory_stats();
  std::size_t io = 0;
  for (const cuda::DeviceBuffer* b : {&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv}) io += b->bytes();
  t.peak = mem.peak;
  t.scratch = mem.peak - io;

  const char* unchecked = "unchecked";
  std::printf("%-18s forward  %s | %s | %9.3f ms %8.2f TFLOP/s\n", c.support.chapter.c_str(),
              p.describe().c_str(), o.check ? (fwd_pass ? "PASS" : "FAIL") : unchecked, t.fwd_ms,
              forward_flops(p) / (t.fwd_ms * 1e-3) / 1e12);
  std::printf("%-18s backward %s | %s | %9.3f ms %8.2f TFLOP/s | device memory %.1f MiB (%.1f MiB beyond the tensors)\n",
              c.support.chapter.c_str(), p.describe().c_str(), o.check ? (bwd_pass ? "PASS" : "FAIL") : unchecked,
              t.bwd_ms, backward_flops(p) / (t.bwd_ms * 1e-3) / 1e12, t.peak / 1048576.0, t.scratch / 1048576.0);
  if (fwd_check) std::printf("%s\n", fwd_check->summary().c_str());
  if (bwd_check) std::printf("%s\n", bwd_check->summary().c_str());
  const bool pass = fwd_pass && bwd_pass;
  if (o.json) {
    std::printf("%s\n", json_line(c, o, deterministic, pass, fwd_check ? &*fwd_check : nullptr,
                                   bwd_check ? &*bwd_check : nullptr, t)
                            .c_str());
  }
  return pass ? 0 : 1;
}

}  // namespace

int run_backward_chapter(const BackwardChapter& chapter, int argc, char** argv, const std::vector<Support>& tables,
                         const std::string& own_flags) {
  const std::string& name = chapter.support.chapter;
  // --deterministic is the backward's own flag: taken out here, before the shared parser sees argv.
  const bool deterministic = take_flag(argc, argv, "--deterministic");
  if (deterministic && !chapter.deterministic)
    return report_error(name, std::invalid_argument("--deterministic: this chapter has no deterministic mode"));
  const Help help{.chapter = name,
                  .runs = "runs the forward pass and then the backward pass (dQ, dK, dV for a seeded dO); both are "
                          "checked against the CPU reference and timed.",
                  .supports = tables.empty() ? std::vector<Support>{chapter.support} : tables,
                  .defaults = chapter.defaults,
                  .chapter_flags = (chapter.deterministic ? "  --deterministic   the backward's bitwise reproducible "
                                                            "mode (dQ added in a fixed order)\n"
                                                          : "") +
                                   own_flags};
  return run_main(help, argc, argv, [&](const Options& o) { return run(chapter, tables, o, deterministic); });
}

}  // namespace fa
