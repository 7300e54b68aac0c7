// Chapter 07's executable: one block-sparse forward pass with a generated mask, checked against
// the float64 reference given the same mask, and timed.
//   ./07_block_sparse --seqlen 8192 --head-dim 128 --pattern random --density 0.25 --block-k 128
//   ./07_block_sparse --help
#include <cstdio>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>


#include "07_block_sparse/block_sparse.h"
#include "common/cuda_check.h"
#include "common/gpu_timer.h"
#include "common/host_data.h"
#include "common/masked_check.h"
#include "common/runner.h"

namespace {

namespace bs = block_sparse;

struct MaskOptions {
  bs::HeadPattern pattern{bs::Pattern::random, 0.5, 1, 1, 0};
  int block_k = 128;
};

const char* kAbout =
    "Chapter 07: block-sparse attention. Mask options (before the shared ones):\n"
    "  --pattern P       dense, random, local, streaming or causal (default random)\n"
    "  --density X       random: fraction of key blocks each query block keeps (default 0.5)\n"
    "  --block-k N       key block size, 64 or 128 (query blocks are 128 rows) (default 128)\n"
    "  --window N        local, streaming: key blocks beyond the diagonal blocks (default 1)\n"
    "  --sink N          streaming: leading key blocks every query block sees (default 1)\n"
    "  --mask-seed N     random: the mask's seed (default 0)\n\n";

// Takes our flags out of argv (the shared parser refuses flags it does not know).
MaskOptions take_mask_flags(int& argc, char** argv) {
  MaskOptions m;
  int kept = 1;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    const bool ours = flag == "--pattern" || flag == "--density" || flag == "--block-k" || flag == "--window" ||
                      flag == "--sink" || flag == "--mask-seed";
    if (!ours) {
      argv[kept++] = argv[a];
      continue;
    }
    if (a + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++a];
    if (flag == "--pattern") {
      m.pattern.pattern = bs::parse_pattern(value);  // names the known patterns if wrong
      continue;
    }
    std::size_t used = 0;
    try {
      if (flag == "--density") m.pattern.density = std::stod(value, &used);
      else if (flag == "--block-k") m.block_k = std::stoi(value, &used);
      else if (flag == "--window") m.pattern.window = std::stoi(value, &used);
      else if (flag == "--sink") m.pattern.sink = std::stoi(value, &used);
      else m.pattern.seed = std::stoull(value, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used != value.size()) throw std::invalid_argument(flag + ": bad value '" + value + "'");
  }
  argc = kept;
  return m;
}

int run(const fa::Options& o, const MaskOptions& m) {
  const fa::Problem& p = o.problem;
  const bs::BlockMask mask = bs::make_mask(p, m.block_k, {m.pattern});
  // Refuse unsupported problems first: before looking for a GPU or drawing inputs.
  fa::check_forward_args(bs::chapter().support, p, &p, &p, &p, &p, &p);
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) {
    std::cerr << "07_block_sparse: cannot run the kernel: " << reason << ". (The CPU parts: ctest -L cpu.)\n";
    return 1;
  }
  const fa::HostInputs in = fa::make_inputs(p, o.seed);
  const std::size_t elem = fa::dtype_size(p.dtype);
  const bs::DeviceBlockMask device_mask(mask);
  fa::cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      out(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float));
  q.upload(fa::encode(in.q, p.dtype));
  k.upload(fa::encode(in.k, p.dtype));
  v.upload(fa::encode(in.v, p.dtype));
  out.poison();
  lse.poison();
  auto forward = [&] { bs::forward(p, device_mask, q.get(), k.get(), v.get(), out.get(), lse.as<float>(), nullptr); };
  forward();  // the checked run: the first one, on poisoned outputs
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  std::optional<fa::ForwardCheck> check;
  if (o.check) check = fa::check_forward_masked(p, in, out.download(), lse.download(), bs::visible_fn(mask));
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
  MaskOptions mask;
  try {
    mask = take_mask_flags(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "07_block_sparse: " << e.what() << "\n";
    return 2;
  }
  return fa::run_main("07_block_sparse", bs::chapter().defaults, kAbout, argc, argv,
                      [&](const fa::Options& o) { return run(o, mask); });
}
