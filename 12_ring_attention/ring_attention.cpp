// Chapter 12's API on whole [B, H, S, D] tensors (chapter.h, backward.h): refuse what the ring
// cannot take, scatter each rank's two zig-zag chunks to it, run the Ring, gather the results.
// The Ring (buffers, streams) and the transport (NCCL communicators) are made once per problem
// and configuration and kept, so that a timed call does no allocation and no NCCL setup.
#include "12_ring_attention/ring.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/cuda/cuda_check.h"

namespace ring_attention {
namespace {

thread_local std::optional<RingConfig> the_override;

fa::Support ring_support() {
  return {.chapter = "12_ring_attention",
          .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
          .head_dims = {64, 128},
          .max_head_dim = 128,
          .min_compute_capability = 90};  // 09's and 11's kernels: sm_90a
}

fa::Problem ring_defaults() {
  fa::Problem p = fa::default_problem(fa::Dtype::bf16);
  p.batch = 1, p.seqlen_q = p.seqlen_k = 4096, p.causal = true;  // a multiple of 2R * 128 for every R <= 8
  return p;
}

// Where chunk `chunk` of a [slices, S, row] tensor goes in (or comes from) a rank's block: the
// block's slot `slot`, a contiguous [slices, C, row] tensor. One 2-D copy: `slices` rows of C
// `row`-element lines. cudaMemcpyDefault: the block may be on another GPU than the tensor.
void copy_chunk(void* block, const void* whole, int slot, int chunk, std::int64_t slices, int seqlen, int C,
                std::int64_t row_bytes, bool to_block, cudaStream_t stream) {
  auto* b = static_cast<unsigned char*>(block) + slot * slices * C * row_bytes;
  auto* w = static_cast<unsigned char*>(const_cast<void*>(whole)) + std::int64_t{chunk} * C * row_bytes;
  const std::size_t width = C * row_bytes, whole_pitch = seqlen * row_bytes;
  if (to_block) FA_CUDA_CHECK(cudaMemcpy2DAsync(b, width, w, whole_pitch, width, slices, cudaMemcpyDefault, stream));
  else FA_CUDA_CHECK(cudaMemcpy2DAsync(w, whole_pitch, b, width, width, slices, cudaMemcpyDefault, stream));
}

// One tensor's two chunks of every rank, between the whole tensor and the blocks. base(r): rank
// r's block; `parts` tensors stacked in a block (K and V: 2) come from `wholes`.
template <class Base>
void move_chunks(const Ring& ring, Base base, const std::vector<const void*>& wholes, std::int64_t slices,
                 std::int64_t row_bytes, bool to_block) {
  const int R = ring.ranks(), S = ring.problem().seqlen_q, C = S / (2 * R);
  for (int r = 0; r < R; ++r) {
    FA_CUDA_CHECK(cudaSetDevice(ring.device(r)));
    for (std::size_t part = 0; part < wholes.size(); ++part)
      for (int slot = 0; slot < 2; ++slot) {
        void* block = static_cast<unsigned char*>(base(r)) + part * 2 * slices * C * row_bytes;
        copy_chunk(block, wholes[part], slot, rank_chunks(r, R)[slot], slices, S, C, row_bytes, to_block,
                   ring.stream(r));
      }
  }
}

// The kept ring for (p, the configuration, the caller's device), rebuilt when any of them changes.
// Throws std::invalid_argument where the configured ring cannot take p (no CUDA call before it).
RingConfig checked_config(const fa::Problem& p) {
  const RingConfig config = current_config();
  if (const std::string why = ring_problem_error(p, config.ranks); !why.empty()) throw std::invalid_argument(why);
  return config;
}

Ring& ring_for(const fa::Problem& p, const RingConfig& config) {
  static std::mutex mutex;
  static std::unique_ptr<Ring> ring;
  static std::string key;
  const std::lock_guard<std::mutex> lock(mutex);
  int device = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  // 09's and 11's kernels exist for sm_90a only; say so before the scatter, not at the first pair.
  if (fa::cuda::compute_capability() != 90)
    throw std::invalid_argument("12_ring_attention: needs Hopper GPUs (compute capability 9.0: 09's and 11's "
                                "kernels); this one is " + std::to_string(fa::cuda::compute_capability()));
  const std::string k = p.describe() + " scale=" + fa::number_text(p.scale()) + " R=" +
                        std::to_string(config.ranks) + " " + transport_name(config.transport) + " device " +
                        std::to_string(device);
  if (!ring || k != key) {
    ring.reset();  // its buffers go before the next ring's are taken
    ring = std::make_unique<Ring>(p, transport_for(config));
    key = k;
    FA_CUDA_CHECK(cudaSetDevice(device));
  }
  return *ring;
}

// The ranks' compute streams start after the caller's stream (their scatter reads its tensors)...
void ranks_wait_for(const Ring& ring, cudaStream_t stream) {
  cudaEvent_t called;
  FA_CUDA_CHECK(cudaEventCreateWithFlags(&called, cudaEventDisableTiming));
  FA_CUDA_CHECK(cudaEventRecord(called, stream));
  for (int r = 0; r < ring.ranks(); ++r) {
    FA_CUDA_CHECK(cudaSetDevice(ring.device(r)));
    FA_CUDA_CHECK(cudaStreamWaitEvent(ring.stream(r), called, 0));
  }
  FA_CUDA_CHECK(cudaEventDestroy(called));  // released once the waits are done
}

// ...and the caller's stream goes on after every rank's gather.
void caller_waits_for(const Ring& ring, cudaStream_t stream, int device) {
  for (int r = 0; r < ring.ranks(); ++r) {
    FA_CUDA_CHECK(cudaSetDevice(ring.device(r)));
    cudaEvent_t gathered;
    FA_CUDA_CHECK(cudaEventCreateWithFlags(&gathered, cudaEventDisableTiming));
    FA_CUDA_CHECK(cudaEventRecord(gathered, ring.stream(r)));
    FA_CUDA_CHECK(cudaSetDevice(device));
    FA_CUDA_CHECK(cudaStreamWaitEvent(stream, gathered, 0));
    FA_CUDA_CHECK(cudaEventDestroy(gathered));
  }
}

}  // namespace

int visible_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: none visible, and no error left behind
    return 0;
  }
  return n;
}

RingConfig current_config() {
  if (the_override) return *the_override;
  return parse_config(std::getenv("FA_RING_RANKS"), std::getenv("FA_RING_TRANSPORT"), visible_gpus(), nccl_built());
}

UseConfig::UseConfig(RingConfig config) : had_outer_(the_override.has_value()), outer_(the_override.value_or(config)) {
  the_override = config;
}
UseConfig::~UseConfig() {
  if (had_outer_) the_override = outer_;
  else the_override.reset();
}

std::shared_ptr<Transport> transport_for(const RingConfig& config) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int>, std::shared_ptr<Transport>> made;
  const std::lock_guard<std::mutex> lock(mutex);
  int device = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  if (config.transport == TransportKind::nccl) {
    if (visible_gpus() < config.ranks)
      throw std::invalid_argument("12_ring_attention: an NCCL ring of " + std::to_string(config.ranks) +
                                  " ranks needs as many GPUs; " + std::to_string(visible_gpus()) + " are visible");
    device = -1;  // the ranks are devices 0 .. R - 1 whatever the caller's
  }
  std::shared_ptr<Transport>& t = made[{static_cast<int>(config.transport), config.ranks, device}];
  if (!t) {
    t = config.transport == TransportKind::nccl ? std::shared_ptr<Transport>(make_nccl_transport(config.ranks))
                                                : std::shared_ptr<Transport>(make_copy_transport(config.ranks, device));
    if (device >= 0) FA_CUDA_CHECK(cudaSetDevice(device));
  }
  return t;
}

namespace {

// What forward and backward share: the caller's device, the Ring of the problem, and the shapes in
// which chunks move between the caller's [B, H, S, D] tensors and the ranks' blocks.
struct Call {
  int device = 0;
  Ring* ring = nullptr;
  std::int64_t BH = 0, BHkv = 0, row = 0;  // slices of Q (and O, dO, LSE), of K and V; bytes a row

  // The ring's ranks wait for the caller's stream, then Q and [K | V] go to them in chunks.
  Call(const fa::Problem& p, const void* q, const void* k, const void* v, cudaStream_t stream) {
    const RingConfig config = checked_config(p);
    FA_CUDA_CHECK(cudaGetDevice(&device));
    ring = &ring_for(p, config);
    BH = std::int64_t{p.batch} * p.heads, BHkv = std::int64_t{p.batch} * p.kv_heads;
    row = p.head_dim * static_cast<std::int64_t>(fa::dtype_size(p.dtype));
    ranks_wait_for(*ring, stream);
    move_chunks(*ring, [&](int r) { return ring->q(r); }, {q}, BH, row, true);
    move_chunks(*ring, [&](int r) { return ring->kv(r); }, {k, v}, BHkv, row, true);  // [K | V]
  }
};

}  // namespace

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  const Call call(p, q, k, v, stream);
  Ring& ring = *call.ring;
  const int device = call.device;
  const std::int64_t BH = call.BH, row = call.row;
  ring.forward();
  move_chunks(ring, [&](int r) { return ring.o(r); }, {o}, BH, row, false);
  move_chunks(ring, [&](int r) { return static_cast<void*>(ring.lse(r)); }, {lse}, BH, sizeof(float), false);
  caller_waits_for(ring, stream, device);
  FA_CUDA_CHECK(cudaSetDevice(device));
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  fa::check_backward_args(backward_chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
  const Call call(p, q, k, v, stream);
  Ring& ring = *call.ring;
  const int device = call.device;
  const std::int64_t BH = call.BH, BHkv = call.BHkv, row = call.row;
  move_chunks(ring, [&](int r) { return ring.o(r); }, {o}, BH, row, true);
  move_chunks(ring, [&](int r) { return static_cast<void*>(ring.lse(r)); }, {lse}, BH, sizeof(float), true);
  move_chunks(ring, [&](int r) { return ring.dout(r); }, {dout}, BH, row, true);
  ring.backward();
  move_chunks(ring, [&](int r) { return ring.dq(r); }, {dq}, BH, row, false);
  move_chunks(ring, [&](int r) { return ring.dkv(r); }, {dk, dv}, BHkv, row, false);  // [dK | dV]
  caller_waits_for(ring, stream, device);
  FA_CUDA_CHECK(cudaSetDevice(device));
}

const fa::Chapter& chapter() {
  static const fa::Chapter c{.support = ring_support(),
                             .forward = forward,
                             .test_head_dims = {64, 128},
                             .defaults = ring_defaults()};
  return c;
}

const fa::BackwardChapter& backward_chapter() {
  static const fa::BackwardChapter c{.support = ring_support(),
                                     .forward = forward,
                                     .backward = backward,
                                     .test_head_dims = {64, 128},
                                     .defaults = ring_defaults()};
  return c;
}

}  // namespace ring_attention
