#include "common/harness/runner.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "common/host/cli.h"
#include "common/host/forward_check.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/gpu_timer.h"
#include "common/host/host_data.h"

namespace fa {
namespace {

std::string gpu_name() {
  cudaDeviceProp prop{};
  int device = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  FA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

std::string json_line(const Chapter& c, const Options& o, bool pass, const ForwardCheck* check, double ms,
                      std::size_t peak, std::size_t scratch) {
  const Problem& p = o.problem;
  std::ostringstream s;
  s.precision(6);
  s << json_problem_fields(c.support.chapter, p) << ",\"checked\":" << (check ? "true" : "false")
    << ",\"pass\":" << (pass ? "true" : "false");
  if (check) {
    s << ",\"max_abs_err\":" << check->o.max_abs << ",\"rel_fro_err\":" << check->o.rel_fro
      << ",\"lse_max_abs_err\":" << check->lse.max_abs;
    if (check->same_precision) s << ",\"same_precision_max_abs_err\":" << check->same_precision->baseline_max_abs;
  }
  s << ",\"ms\":" << ms << ",\"tflops\":" << forward_flops(p) / (ms * 1e-3) / 1e12
    << ",\"peak_mem_bytes\":" << peak << ",\"workspace_bytes\":" << scratch << "}";
  return s.str();
}

int run(const Chapter& c, const Options& o) {
  const Problem& p = o.problem;
  // Refuse unsupported problems first: before looking for a GPU or drawing inputs.
  check_forward_args(c.support, p, &p, &p, &p, &p, &p);
  require_gpu();

  const HostInputs in = make_inputs(p, o.seed);
  cuda::release_workspace();
  cuda::reset_peak();
  cuda::DeviceBuffer q(p.q_elems() * dtype_size(p.dtype)), k(p.kv_elems() * dtype_size(p.dtype)),
      v(p.v_elems() * dtype_size(p.dtype)), out(p.o_elems() * dtype_size(p.dtype)),
      lse(p.lse_elems() * sizeof(float));
  // Q, K, V in the problem's layout (bshd: [B, S, H, D]); O comes back for the check.
  q.upload(to_layout(encode(in.q, p.dtype), p, Operand::q));
  k.upload(to_layout(encode(in.k, p.dtype), p, Operand::k));
  v.upload(to_layout(encode(in.v, p.dtype), p, Operand::v));
  out.poison();
  lse.poison();

  auto forward = [&] {
    c.forward(p, q.get(), k.get(), v.get(), out.get(), lse.as<float>(), nullptr);
  };
  forward();  // the checked run: the first one, on poisoned outputs
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  std::optional<ForwardCheck> check;
  if (o.check)
    check = check_forward(p, in, from_layout(out.download(), p, Operand::o),
                          lse.download());
  const bool pass = !check || check->pass();

  const float ms = cuda::median_ms(forward, o.iters);
  const cuda::MemoryStats mem = cuda::memory_stats();
  const std::size_t io = q.bytes() + k.bytes() + v.bytes() + out.bytes() + lse.bytes();
  const std::size_t scratch = mem.peak - io;

  std::printf("%-18s %s | %s | %9.3f ms %8.2f TFLOP/s | device memory %.1f MiB (%.1f MiB beyond Q,K,V,O,LSE)\n",
              c.support.chapter.c_str(), p.describe().c_str(),
              o.check ? (pass ? "PASS" : "FAIL") : "unchecked", ms,
              forward_flops(p) / (ms * 1e-3) / 1e12, mem.peak / 1048576.0, scratch / 1048576.0);
  if (check) std::printf("%s\n", check->summary().c_str());
  if (o.json) std::printf("%s\n", json_line(c, o, pass, check ? &*check : nullptr, ms, mem.peak, scratch).c_str());
  return pass ? 0 : 1;
}

}  // namespace

std::string json_problem_fields(const std::string& chapter, const Problem& p) {
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::ostringstream s;
  s << "{\"chapter\":\"" << chapter << "\",\"gpu\":\"" << gpu_name() << "\",\"cuda_runtime\":" << runtime
    << ",\"batch\":" << p.batch << ",\"heads\":" << p.heads << ",\"kv_heads\":" << p.kv_heads
    << ",\"seqlen_q\":" << p.seqlen_q << ",\"seqlen_k\":" << p.seqlen_k << ",\"head_dim\":" << p.head_dim
    << ",\"causal\":" << (p.causal ? "true" : "false") << ",\"dtype\":\"" << dtype_name(p.dtype) << "\""
    << ",\"layout\":\"" << layout_name(p.layout) << "\",\"softcap\":" << p.softcap;
  return s.str();
}

void require_gpu() {
  const std::string reason = cuda::unavailable_reason();
  if (!reason.empty())
    throw cuda::Error("cannot run the kernels: " + reason + " (the CPU parts run in the tests: ctest -L cpu)");
}

int report_error(const std::string& chapter, const std::exception& e) {
  std::cerr << error_line(chapter, e.what()) << "\n";
  return dynamic_cast<const std::invalid_argument*>(&e) ? 2 : 1;
}

int run_main(Help help, int argc, char** argv, const std::function<int(const Options&)>& body) {
  if (help.program.empty()) help.program = argc > 0 ? argv[0] : help.chapter;
  try {
    return body(parse_cli(argc, argv, help.defaults));
  } catch (const HelpRequested&) {
    std::cout << usage(help);
    return 0;
  } catch (const std::exception& e) {
    return report_error(help.chapter, e);
  }
}

int run_chapter(const Chapter& chapter, int argc, char** argv, const std::string& chapter_flags) {
  const Help help{.chapter = chapter.support.chapter,
                  .runs = "runs one attention forward pass, checks it against the CPU reference and times it.",
                  .supports = {chapter.support},
                  .defaults = chapter.defaults,
                  .chapter_flags = chapter_flags};
  return run_main(help, argc, argv, [&](const Options& o) { return run(chapter, o); });
}

}  // namespace fa
