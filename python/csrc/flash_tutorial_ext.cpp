// flash_tutorial._C: the chapters' kernels behind the Python op (python/flash_tutorial/ops.py).
// On a Hopper GPU (compute capability 9.0), f16/bf16 without a block mask at the head dims both
// chapters take (64, 96, 128, 192, 256): forward 09, backward 11. Elsewhere: forward 06 (f16,
// bf16) or 05 (f32), 07 under a block mask; backward 08 (dense or block-sparse).
// Tensors arrive as contiguous [B, H, S, D] on one CUDA device, or with bshd as contiguous
// [B, S, H, D] (the f16/bf16 forwards of 06, 07 and 09 and the dense f16/bf16 backwards of 08 and
// 11 read them in place; the Python side sends bshd nowhere else, asking reads_bshd first); the
// chapters' own checks refuse
// what they do not take (std::invalid_argument, which Python sees as ValueError), and ops.py asks
// `unsupported` first so that it can fall back to the reference with the reason instead.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "05_flash_v2/flash_v2.h"
#include "06_tensor_core/tensor_core.h"
#include "07_block_sparse/block_mask.h"
#include "07_block_sparse/block_sparse.h"
#include "08_backward/backward.h"
#include "09_flash_v3/flash_v3.h"
#include "11_backward_v3/backward_v3.h"
#include "common/cuda/device_memory.h"  // WorkspaceSource
#include "common/host/support.h"

namespace {

using torch::Tensor;

std::optional<fa::Dtype> dtype_of(const Tensor& t) {
  if (t.scalar_type() == torch::kFloat32) return fa::Dtype::f32;
  if (t.scalar_type() == torch::kFloat16) return fa::Dtype::f16;
  if (t.scalar_type() == torch::kBFloat16) return fa::Dtype::bf16;
  return std::nullopt;
}

fa::Problem problem_of(const Tensor& q, const Tensor& k, bool causal, double scale, bool bshd = false,
                       int64_t window_left = -1, int64_t window_right = -1, double softcap = 0) {
  fa::Problem p;
  const int s = bshd ? 1 : 2, h = bshd ? 2 : 1;  // [B, S, H, D] or [B, H, S, D]
  p.batch = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(h));
  p.kv_heads = static_cast<int>(k.size(h));
  p.seqlen_q = static_cast<int>(q.size(s));
  p.seqlen_k = static_cast<int>(k.size(s));
  if (bshd) p.layout = fa::Layout::bshd;  // a chapter refuses it unless its Support takes it (06, 07, 08)
  p.head_dim = static_cast<int>(q.size(3));
  p.causal = causal;
  p.window_left = static_cast<int>(window_left);  // -1: unbounded (Problem's convention, FlashAttention's)
  p.window_right = static_cast<int>(window_right);
  p.softmax_scale = static_cast<float>(scale);
  p.softcap = static_cast<float>(softcap);  // 0: off (Gemma 2's logit cap where > 0)
  p.dtype = *dtype_of(q);
  return p;
}

// Chapter 07's mask from the op's dense bool [B, H, ceil(Sq / 128), ceil(Sk / block_k)].
block_sparse::BlockMask mask_of(const fa::Problem& p, const Tensor& block_mask, int64_t block_k) {
  const Tensor dense = block_mask.to(torch::kCPU, torch::kUInt8).contiguous();
  const std::uint8_t* d = dense.data_ptr<std::uint8_t>();
  return block_sparse::from_dense(block_sparse::mask_shape(p, static_cast<int>(block_k)),
                                  std::vector<std::uint8_t>(d, d + dense.numel()));
}

// Whether a call runs Hopper's chapters, 09's forward and 11's backward: the tensors' GPU is an
// sm_90 one, both chapters' Support tables take the dtype and head dim (64, 96, 128, 192, 256),
// and there is no block mask. At every one of those head dims the pair runs faster than 06 and 08
// (python/README.md: Which kernels run).
bool hopper_path(const Tensor& q, fa::Dtype dt, int head_dim, bool has_mask) {
  if (has_mask || !q.is_cuda()) return false;
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(q.get_device());
  if (prop->major != 9 || prop->minor != 0) return false;
  const fa::Support& s = backward_v3::chapter().support;
  return std::find(s.dtypes.begin(), s.dtypes.end(), dt) != s.dtypes.end() && fa::supports_head_dim(s, head_dim) &&
         fa::supports_head_dim(flash_v3::chapter().support, head_dim);
}

// The chapter whose forward runs a call: 09 on Hopper (hopper_path), 07 under a block mask, else
// 05 (f32: its 3xTF32 kernel up to head dim 128, its FFMA kernel above; backward::forward) or 06
// (f16, bf16).
const fa::Support& forward_support(const Tensor& q, fa::Dtype dt, int head_dim, bool has_mask) {
  return hopper_path(q, dt, head_dim, has_mask) ? flash_v3::chapter().support
         : has_mask                          ? block_sparse::chapter().support
         : dt == fa::Dtype::f32              ? flash_v2::chapter().support
                                             : tensor_core::chapter().support;
}

// The backward's table: 11 on Hopper (hopper_path), else 08's fp32 kernels (any head dim up to
// 256) or its tensor-core one (dense or block-sparse).
const fa::Support& backward_support(const Tensor& q, fa::Dtype dt, int head_dim, bool has_mask) {
  return hopper_path(q, dt, head_dim, has_mask) ? backward_v3::chapter().support
         : dt == fa::Dtype::f32              ? backward::fp32_chapter().support
                                             : backward::tensor_core_support();
}

// Whether the chapter that runs the call's forward (or backward) reads [B, S, H, D] tensors in
// place: its Support's bshd_dtypes. 08's block-sparse walk takes [B, H, S, D] only.
bool reads_bshd(const Tensor& q, bool has_mask, bool for_backward) {
  const auto dt = dtype_of(q);
  if (!dt) return false;
  const int d = static_cast<int>(q.size(3));
  if (for_backward) return !has_mask && fa::takes_bshd(backward_support(q, *dt, d, has_mask), *dt);
  return fa::takes_bshd(forward_support(q, *dt, d, has_mask), *dt);
}

// Whether the chapters that run a call's forward and backward read [B, S, H, D] q, k, v through
// strides of their own (Support::input_strides: 09 and 11): then a fused QKV projection's slices
// go to them as they lie, without copies.
bool takes_input_strides(const Tensor& q, bool has_mask) {
  const auto dt = dtype_of(q);
  if (!dt || !q.is_cuda()) return false;
  const int d = static_cast<int>(q.size(3));
  return forward_support(q, *dt, d, has_mask).input_strides && backward_support(q, *dt, d, has_mask).input_strides;
}

// [B, S, H, D] t's strides as Problem's input strides where they are not the contiguous layout's.
std::optional<fa::Strides> input_strides_of(const Tensor& t) {
  if (t.is_contiguous()) return std::nullopt;
  return fa::Strides{t.stride(0), t.stride(2), t.stride(1)};
}

// Why the kernels cannot run this call ("" when they can): the chapters' Support tables. A sliding
// window and a logit softcap run only where both chapters take them (09 and 11: hopper_path).
std::string unsupported(const Tensor& q, const Tensor& k, bool has_mask, bool for_backward, bool window,
                        bool softcap) {
  if (!q.is_cuda()) return "the tensors are not on a CUDA device";
  const auto dt = dtype_of(q);
  if (!dt) return std::string("dtype ") + c10::toString(q.scalar_type()) + " (the kernels take float32, float16, bfloat16)";
  const int d = static_cast<int>(q.size(3));
  const fa::Support& fwd = forward_support(q, *dt, d, has_mask);
  auto takes = [&](const fa::Support& s) {
    return std::find(s.dtypes.begin(), s.dtypes.end(), *dt) != s.dtypes.end() && fa::supports_head_dim(s, d);
  };
  if (!takes(fwd)) return fwd.chapter + " does not take " + fa::dtype_name(*dt) + " at head dim " + std::to_string(d);
  if (window && !fwd.window) return fwd.chapter + " does not take a sliding window (09 and 11 do, on Hopper)";
  if (window && for_backward && !backward_support(q, *dt, d, has_mask).window)
    return backward_support(q, *dt, d, has_mask).chapter + " does not take a sliding window (11 does, on Hopper)";
  if (softcap && !fwd.softcap) return fwd.chapter + " does not take a logit softcap (09 and 11 do, on Hopper)";
  if (softcap && for_backward && !backward_support(q, *dt, d, has_mask).softcap)
    return backward_support(q, *dt, d, has_mask).chapter + " does not take a logit softcap (11 does, on Hopper)";
  if (for_backward) {
    const fa::Support& bwd = backward_support(q, *dt, d, has_mask);
    if (!takes(bwd)) return bwd.chapter + " does not take " + fa::dtype_name(*dt) + " at head dim " + std::to_string(d);
    if (has_mask && (*dt == fa::Dtype::f32 || d > 128))
      return "08's block-sparse backward takes f16 and bf16 at head dims up to 128";
  }
  (void)k;
  return "";
}

// The chapters that would run a call (forward, backward), for the tests and the README's examples.
std::tuple<std::string, std::string> chapters(const Tensor& q, bool has_mask) {
  const auto dt = dtype_of(q);
  if (!dt || !q.is_cuda()) return {"", ""};
  const int d = static_cast<int>(q.size(3));
  return {forward_support(q, *dt, d, has_mask).chapter, backward_support(q, *dt, d, has_mask).chapter};
}

// The chapters' scratch memory (fa::cuda::workspace: 08's and 11's D_i, dQ accumulators, turns)
// from PyTorch's caching allocator for the duration of one call: byte tensors held here until the
// call returns, after which the allocator reuses them in the stream's order. No cudaMalloc in a
// steady state, and under CUDA-graph capture the blocks come from the graph's private pool, which
// lives as long as the graph (the chapters' own grow-only buffer would allocate inside the capture,
// and could later free a buffer a graph still uses).
struct TorchWorkspace {
  std::vector<Tensor> held;
  static void* take(std::size_t bytes, void* self) {
    auto& held = static_cast<TorchWorkspace*>(self)->held;
    held.push_back(torch::empty({static_cast<int64_t>(bytes)},
                                torch::TensorOptions().device(torch::kCUDA, c10::cuda::current_device()).dtype(torch::kUInt8)));
    return held.back().data_ptr();
  }
};

// bshd: q, k, v and O as [B, S, H, D] (06 and 07, f16/bf16); LSE is [B, H, Sq] either way.
std::tuple<Tensor, Tensor> forward_op(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                   const std::optional<Tensor>& block_mask, int64_t block_k, bool bshd,
                                   int64_t window_left, int64_t window_right, double softcap) {
  TORCH_CHECK((q.is_contiguous() && k.is_contiguous() && v.is_contiguous()) || bshd,
              "flash_tutorial._C: contiguous [B, H, S, D] (or with bshd [B, S, H, D]) tensors");
  const c10::cuda::CUDAGuard on_device(q.device());  // the kernels launch on the current device
  TorchWorkspace scratch;
  const fa::cuda::WorkspaceSource from_torch(&TorchWorkspace::take, &scratch);
  fa::Problem p = problem_of(q, k, causal, scale, bshd, window_left, window_right, softcap);
  if (bshd) {  // a chapter without Support::input_strides refuses these (check_forward_args)
    p.q_input = input_strides_of(q);
    p.k_input = input_strides_of(k);
    p.v_input = input_strides_of(v);
  }
  Tensor out = torch::empty(q.sizes(), q.options());  // contiguous, whatever q's strides
  Tensor lse = torch::empty({p.batch, p.heads, p.seqlen_q}, q.options().dtype(torch::kFloat32));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (block_mask) {
    // Uploaded per call; freed (cudaFree, which waits for the device) when it goes out of scope.
    const block_sparse::DeviceBlockMask mask(mask_of(p, *block_mask, block_k));
    block_sparse::forward(p, mask, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                          stream);
  } else if (hopper_path(q, p.dtype, p.head_dim, false)) {
    flash_v3::forward(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(), stream);
  } else {
    // 08's forward, the one its backward pairs with: f32 is 05's (up to head dim 128 in 3xTF32,
    // whose scores the backward recomputes bit for bit, above it FFMA); f16/bf16 06's.
    backward::forward(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(), stream);
  }
  return {out, lse};
}

// bshd: q, k, v, O, dO and the gradients as [B, S, H, D] (08's tensor-core dense backward).
std::tuple<Tensor, Tensor, Tensor> backward_op(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& out, const Tensor& lse, bool causal, double scale,
                                            const std::optional<Tensor>& block_mask, int64_t block_k, bool bshd,
                                            int64_t window_left, int64_t window_right, double softcap) {
  TORCH_CHECK(dout.is_contiguous() && out.is_contiguous() && lse.is_contiguous() &&
                  ((q.is_contiguous() && k.is_contiguous() && v.is_contiguous()) || bshd),
              "flash_tutorial._C: contiguous tensors");
  const c10::cuda::CUDAGuard on_device(q.device());
  TorchWorkspace scratch;
  const fa::cuda::WorkspaceSource from_torch(&TorchWorkspace::take, &scratch);
  fa::Problem p = problem_of(q, k, causal, scale, bshd, window_left, window_right, softcap);
  if (bshd) {  // q, k, v as the forward read them; dQ, dK, dV come out contiguous
    p.q_input = input_strides_of(q);
    p.k_input = input_strides_of(k);
    p.v_input = input_strides_of(v);
  }
  Tensor dq = torch::empty(q.sizes(), q.options()), dk = torch::empty(k.sizes(), k.options()),
         dv = torch::empty(v.sizes(), v.options());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (block_mask) {
    const backward::DeviceSparseWalk walk(p, mask_of(p, *block_mask, block_k));
    backward::backward(p, walk, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                       dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), stream, {});
  } else if (hopper_path(q, p.dtype, p.head_dim, false)) {
    backward_v3::backward(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                          dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), stream);
  } else {
    backward::backward(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                       dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), stream);
  }
  return {dq, dk, dv};
}

// The Hopper backward with dQ, dK and dV as float32, unrounded (11's backward_v3::backward_f32), for
// a caller that sums the parts of several backwards and rounds once (flash_tutorial.ring_attention):
// [B, H, S, D] contiguous f16/bf16 tensors where hopper_path holds, no window or softcap.
std::tuple<Tensor, Tensor, Tensor> backward_f32_op(const Tensor& dout, const Tensor& q, const Tensor& k,
                                                   const Tensor& v, const Tensor& out, const Tensor& lse, bool causal,
                                                   double scale) {
  for (const Tensor* t : {&dout, &q, &k, &v, &out, &lse})
    TORCH_CHECK(t->is_contiguous(), "flash_tutorial._C.backward_f32: contiguous tensors");
  const auto dt = dtype_of(q);
  TORCH_CHECK(dt && *dt != fa::Dtype::f32 && hopper_path(q, *dt, static_cast<int>(q.size(3)), false),
              "flash_tutorial._C.backward_f32: f16/bf16 CUDA tensors of a head dim 11 takes, on a Hopper GPU");
  const c10::cuda::CUDAGuard on_device(q.device());
  TorchWorkspace scratch;
  const fa::cuda::WorkspaceSource from_torch(&TorchWorkspace::take, &scratch);
  const fa::Problem p = problem_of(q, k, causal, scale);
  const auto f32 = q.options().dtype(torch::kFloat32);
  Tensor dq = torch::empty(q.sizes(), f32), dk = torch::empty(k.sizes(), f32), dv = torch::empty(v.sizes(), f32);
  backward_v3::backward_f32(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                            dout.data_ptr(), dq.data_ptr<float>(), dk.data_ptr<float>(), dv.data_ptr<float>(),
                            at::cuda::getCurrentCUDAStream());
  return {dq, dk, dv};
}

// Whether the kernels run a packed batch's forward (or, with for_backward, its backward) in one
// launch (Support::varlen: 09 and 11 on Hopper): q is a [total, H, D] CUDA tensor of a dtype and
// head dim hopper_path takes.
bool takes_varlen(const Tensor& q, bool for_backward) {
  const auto dt = dtype_of(q);
  if (!dt || !q.is_cuda() || q.dim() != 3) return false;
  const int d = static_cast<int>(q.size(2));
  if (!hopper_path(q, *dt, d, false)) return false;
  return (for_backward ? backward_support(q, *dt, d, false) : forward_support(q, *dt, d, false)).varlen;
}

// A packed batch as a Problem: q [total_q, H, D] and k [total_k, Hkv, D] as [1, total, H, D]
// (the layout bshd), the sequences' offsets (B + 1 each, on the host: the launches build their
// walks from them).
fa::Problem varlen_problem(const Tensor& q, const Tensor& k, const std::vector<int64_t>& cu_seqlens_q,
                           const std::vector<int64_t>& cu_seqlens_k, bool causal, double scale, int64_t window_left,
                           int64_t window_right) {
  fa::Problem p = problem_of(q.unsqueeze(0), k.unsqueeze(0), causal, scale, /*bshd=*/true, window_left, window_right);
  p.cu_seqlens_q.assign(cu_seqlens_q.begin(), cu_seqlens_q.end());
  p.cu_seqlens_k.assign(cu_seqlens_k.begin(), cu_seqlens_k.end());
  return p;
}

// A packed batch's forward in one launch of 09 (takes_varlen): q [total_q, H, D], k, v [total_k,
// Hkv, D], rows contiguous ([total, H, D] as [1, total, H, D], the layout bshd); cu_seqlens_q and
// cu_seqlens_k the sequences' offsets (B + 1 each, on the host: the launch builds the walk from
// them). Returns O [total_q, H, D] and LSE [H, total_q].
std::tuple<Tensor, Tensor> forward_varlen_op(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const std::vector<int64_t>& cu_seqlens_q,
                                             const std::vector<int64_t>& cu_seqlens_k, bool causal, double scale,
                                             int64_t window_left, int64_t window_right) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && q.is_contiguous() && k.is_contiguous() &&
                  v.is_contiguous(),
              "flash_tutorial._C.attention_varlen: contiguous [total, H, D] tensors");
  TORCH_CHECK(takes_varlen(q, false),
              "flash_tutorial._C.attention_varlen: no kernel here takes a packed batch (09 on Hopper)");
  const c10::cuda::CUDAGuard on_device(q.device());
  TorchWorkspace scratch;
  const fa::cuda::WorkspaceSource from_torch(&TorchWorkspace::take, &scratch);
  const fa::Problem p = varlen_problem(q, k, cu_seqlens_q, cu_seqlens_k, causal, scale, window_left, window_right);
  Tensor out = torch::empty(q.sizes(), q.options());
  Tensor lse = torch::empty({p.heads, p.seqlen_q}, q.options().dtype(torch::kFloat32));
  flash_v3::forward(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                    at::cuda::getCurrentCUDAStream());
  return {out, lse};
}

// A packed batch's backward in one launch of 11 (takes_varlen with for_backward): the tensors as
// forward_varlen_op takes and returns them, dout as out. Returns dQ [total_q, H, D] and dK, dV
// [total_k, Hkv, D].
std::tuple<Tensor, Tensor, Tensor> backward_varlen_op(const Tensor& dout, const Tensor& q, const Tensor& k,
                                                      const Tensor& v, const Tensor& out, const Tensor& lse,
                                                      const std::vector<int64_t>& cu_seqlens_q,
                                                      const std::vector<int64_t>& cu_seqlens_k, bool causal,
                                                      double scale, int64_t window_left, int64_t window_right) {
  for (const Tensor* t : {&dout, &q, &k, &v, &out})
    TORCH_CHECK(t->dim() == 3 && t->is_contiguous(),
                "flash_tutorial._C.attention_varlen (backward): contiguous [total, H, D] tensors");
  TORCH_CHECK(lse.dim() == 2 && lse.size(0) == q.size(1) && lse.size(1) == q.size(0) && lse.is_contiguous() &&
                  lse.scalar_type() == torch::kFloat32,
              "flash_tutorial._C.attention_varlen (backward): lse as the forward returns it, [H, total_q] float32");
  TORCH_CHECK(takes_varlen(q, true),
              "flash_tutorial._C.attention_varlen (backward): no kernel here takes a packed batch's backward "
              "(11 on Hopper)");
  const c10::cuda::CUDAGuard on_device(q.device());
  TorchWorkspace scratch;
  const fa::cuda::WorkspaceSource from_torch(&TorchWorkspace::take, &scratch);
  const fa::Problem p = varlen_problem(q, k, cu_seqlens_q, cu_seqlens_k, causal, scale, window_left, window_right);
  Tensor dq = torch::empty(q.sizes(), q.options()), dk = torch::empty(k.sizes(), k.options());
  Tensor dv = torch::empty(v.sizes(), v.options());
  backward_v3::backward(p, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                        dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), at::cuda::getCurrentCUDAStream());
  return {dq, dk, dv};
}

// The op's eager fast path (flash_tutorial.attention calls it where the kernels run both passes,
// without a block mask, outside torch.compile): autograd in C++, so that a call costs one Python
// -> C++ crossing forward and none backward, where the custom ops of ops.py (which torch.compile
// traces) cross into Python for the dispatch, the autograd node and the backward. The same kernels
// run either way: forward_op and backward_op above. bshd: the tensors as [B, S, H, D], for the
// chapters that read them in place (the backward's chapter takes the forward's layout where there
// is no block mask).
struct Attention : torch::autograd::Function<Attention> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& q,
                                                const Tensor& k, const Tensor& v, bool causal, double scale,
                                                int64_t window_left, int64_t window_right, bool bshd,
                                                double softcap) {
    auto [out, lse] = forward_op(q, k, v, causal, scale, std::nullopt, 128, bshd, window_left, window_right, softcap);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->mark_non_differentiable({lse});  // LSE is for inspection: no gradient flows through it
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["window_left"] = window_left;
    ctx->saved_data["window_right"] = window_right;
    ctx->saved_data["bshd"] = bshd;
    ctx->saved_data["softcap"] = softcap;
    return {out, lse};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dq, dk, dv] =
        backward_op(grads[0].contiguous(), saved[0], saved[1], saved[2], saved[3], saved[4],
                    ctx->saved_data["causal"].toBool(), ctx->saved_data["scale"].toDouble(), std::nullopt, 128,
                    ctx->saved_data["bshd"].toBool(), ctx->saved_data["window_left"].toInt(),
                    ctx->saved_data["window_right"].toInt(), ctx->saved_data["softcap"].toDouble());
    return {dq, dk, dv, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                                     int64_t window_left, int64_t window_right, bool bshd, double softcap) {
  const auto outs = Attention::apply(q, k, v, causal, scale, window_left, window_right, bshd, softcap);
  return {outs[0], outs[1]};
}

// The packed batch's eager path (flash_tutorial.attention_varlen where takes_varlen holds both
// ways, outside torch.compile): forward_varlen_op and backward_varlen_op with the autograd in C++, as
// Attention above, so that a model calling it once a layer pays one Python -> C++ crossing a call
// forward and none backward. The offsets are host lists (the launches build their walks from
// them), kept for the backward.
struct AttentionVarlen : torch::autograd::Function<AttentionVarlen> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const Tensor& q,
                                                const Tensor& k, const Tensor& v,
                                                const std::vector<int64_t>& cu_seqlens_q,
                                                const std::vector<int64_t>& cu_seqlens_k, bool causal, double scale,
                                                int64_t window_left, int64_t window_right) {
    const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
    auto [out, lse] =
        forward_varlen_op(qc, kc, vc, cu_seqlens_q, cu_seqlens_k, causal, scale, window_left, window_right);
    ctx->save_for_backward({qc, kc, vc, out, lse});
    ctx->mark_non_differentiable({lse});  // LSE is for inspection: no gradient flows through it
    ctx->saved_data["cu_seqlens_q"] = cu_seqlens_q;
    ctx->saved_data["cu_seqlens_k"] = cu_seqlens_k;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["window_left"] = window_left;
    ctx->saved_data["window_right"] = window_right;
    return {out, lse};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dq, dk, dv] = backward_varlen_op(
        grads[0].contiguous(), saved[0], saved[1], saved[2], saved[3], saved[4],
        ctx->saved_data["cu_seqlens_q"].toIntVector(), ctx->saved_data["cu_seqlens_k"].toIntVector(),
        ctx->saved_data["causal"].toBool(), ctx->saved_data["scale"].toDouble(),
        ctx->saved_data["window_left"].toInt(), ctx->saved_data["window_right"].toInt());
    return {dq, dk, dv, Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor> attention_varlen(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const std::vector<int64_t>& cu_seqlens_q,
                                            const std::vector<int64_t>& cu_seqlens_k, bool causal, double scale,
                                            int64_t window_left, int64_t window_right) {
  const auto outs =
      AttentionVarlen::apply(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, scale, window_left, window_right);
  return {outs[0], outs[1]};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "The CUDA attention tutorial's kernels (flash_tutorial.ops calls them)";
  m.def("forward", &forward_op, "O, LSE of chapters 05 / 06 / 07 / 09");
  m.def("backward", &backward_op, "dQ, dK, dV of chapter 08 or 11");
  m.def("attention", &attention, "O, LSE with autograd in C++ (the eager fast path, no block mask)");
  m.def("chapters", &chapters, "the chapters whose forward and backward would run a call");
  m.def("unsupported", &unsupported, "why the kernels cannot run a call ('' when they can)");
  m.def("backward_f32", &backward_f32_op, "dQ, dK, dV of chapter 11 as float32, unrounded (ring attention's parts)");
  m.def("attention_varlen", &attention_varlen,
        "O, LSE of a packed batch with autograd in C++ (one launch of 09 forward, of 11 backward)");
  m.def("takes_varlen", &takes_varlen, "whether the kernels run a packed batch's forward (or backward) in one launch",
        pybind11::arg("q"), pybind11::arg("for_backward") = false);
  m.def("takes_input_strides", &takes_input_strides,
        "whether the call's chapters read [B, S, H, D] q, k, v through strides of their own");
  m.def("reads_bshd", &reads_bshd, "whether the forward's (or backward's) chapter reads [B, S, H, D] in place");
}
