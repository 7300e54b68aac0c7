"""The op: torch.library custom ops for the forward and the backward, tied together by autograd.

`flash_tutorial::attention_fwd(q, k, v, causal, scale, block_mask, block_k, bshd, window_left,
window_right, softcap) -> (out, lse)` and `flash_tutorial::attention_bwd(..., bshd, window_left,
window_right, softcap) -> (dq, dk, dv)` take contiguous [B, H, S, D] tensors, or
with `bshd=True` contiguous [B, S, H, D] ones (the f16/bf16 forwards of 06, 07 and 09 and the dense
f16/bf16 backwards of 08 and 11 read them in place; they are asked for only where those run,
reads_bshd). attention() calls these ops under torch.compile, with a block mask and where the
reference runs; in eager mode it calls _C.attention (fast_path), the same kernels with the
autograd in C++. Each runs the
tutorial's CUDA kernels through the compiled extension `flash_tutorial._C` where it can, and the
PyTorch reference (reference.py) otherwise, warning once per reason. Both have fake (meta)
implementations, so torch.compile traces through them without running them.
"""
import warnings
from typing import Optional, Tuple

import torch

from . import reference

try:  # the compiled kernels (not built yet: see python/README.md)
    from . import _C  # noqa: F401
    _EXTENSION_ERROR = None
except ImportError as e:
    _C = None
    _EXTENSION_ERROR = str(e)

_warned = set()


# The answers of kernel_unavailable_reason and reads_bshd depend on the GPU, the dtype, the head dim
# and the flags only: asked once per combination (a model asks the same question at every layer
# and step). Under torch.compile attention() asks neither while tracing.
_reasons, _bshd = {}, {}


def kernel_unavailable_reason(q: torch.Tensor, k: Optional[torch.Tensor] = None, has_mask: bool = False,
                              backward: bool = False, window: bool = False, softcap: bool = False) -> Optional[str]:
    """Why the CUDA kernels cannot run this call (None: they can): the extension is not built, the
    tensors are not on a GPU, or the chapters' Support tables refuse the dtype, the head dim, a
    sliding window or a logit softcap (only 09 and 11, on a Hopper GPU, take those two)."""
    if _C is None:
        return "the CUDA extension flash_tutorial._C is not built (python/README.md: FA_PYTHON_EXTENSION)"
    if not q.is_cuda:
        return f"the tensors are on {q.device.type}, the kernels run on CUDA devices"
    key = (q.device, q.dtype, q.shape[-1], has_mask, backward, window, softcap)
    if key not in _reasons:
        _reasons[key] = _C.unsupported(q, q if k is None else k, has_mask, backward, window, softcap) or None
    return _reasons[key]


def reads_bshd(q: torch.Tensor, has_mask: bool = False, backward: bool = False) -> bool:
    """Whether the chapter whose forward (or backward) runs this call takes [B, S, H, D] tensors in
    place (its Support table's bshd_dtypes: 06's and 07's forwards and 08's dense f16/bf16 backward do). Only
    asked where the kernels can run the call."""
    if _C is None:
        return False
    key = (q.device, q.dtype, q.shape[-1], has_mask, backward)
    if key not in _bshd:
        _bshd[key] = _C.reads_bshd(q, has_mask, backward)
    return _bshd[key]


_strided = {}


def takes_input_strides(q: torch.Tensor, has_mask: bool = False) -> bool:
    """Whether the chapters that run this call's forward and backward read [B, S, H, D] q, k, v
    through strides of their own (09 and 11: their tensor maps), so that slices of a fused QKV
    projection need no copy. Only asked where the kernels run the call in that layout."""
    if _C is None or not q.is_cuda:
        return False
    key = (q.device, q.dtype, q.shape[-1], has_mask)
    if key not in _strided:
        _strided[key] = _C.takes_input_strides(q, has_mask)
    return _strided[key]


_varlen = {}


def takes_varlen(q: torch.Tensor, backward: bool = False) -> bool:
    """Whether the kernels run a packed batch's forward (backward=True: its backward) in one launch
    (09 and 11 on Hopper, for q's dtype and head dim): q is [total, H, D]."""
    if _C is None or not q.is_cuda or q.dim() != 3:
        return False
    key = (q.device, q.dtype, q.shape[-1], backward)
    if key not in _varlen:
        _varlen[key] = _C.takes_varlen(q, backward)
    return _varlen[key]


def tma_friendly(t: torch.Tensor) -> bool:
    """A [B, S, H, D] tensor the tensor maps can read as it lies: rows contiguous, every other stride
    a positive multiple of 16 bytes, the start 16-byte aligned."""
    step = 16 // t.element_size()
    return (t.stride(-1) == 1 and all(s > 0 and s % step == 0 for s in t.stride()[:-1])
            and t.data_ptr() % 16 == 0)


def fast_path(q: torch.Tensor, has_mask: bool, window: bool, softcap: bool = False) -> bool:
    """Whether attention() may call _C.attention, the op with its autograd in C++: in eager mode,
    without a block mask, where the kernels run the forward and the backward (no fallback needed)."""
    return (not has_mask and not torch.compiler.is_compiling() and _C is not None
            and kernel_unavailable_reason(q, has_mask=False, window=window, softcap=softcap) is None
            and kernel_unavailable_reason(q, has_mask=False, backward=True, window=window, softcap=softcap) is None)


def chapters(q: torch.Tensor, has_mask: bool = False) -> Tuple[str, str]:
    """The chapters whose forward and backward run this call where the kernels can: ("09_flash_v3",
    "11_backward_v3") on a Hopper GPU for float16/bfloat16 at head dims 64, 96, 128, 192, 256 without a block
    mask; elsewhere 05, 06 or 07 and 08. ("", "") without the extension or off the GPU."""
    if _C is None:
        return "", ""
    return tuple(_C.chapters(q, has_mask))


def _fallback(reason: str, stacklevel: int = 3) -> None:
    """Warns once per reason. attention() calls it first, so the warning names the user's line;
    the ops call it too (the backward, and calls of the ops themselves)."""
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"flash_tutorial: running the PyTorch reference: {reason}", stacklevel=stacklevel)


@torch.library.custom_op("flash_tutorial::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
                  block_mask: Optional[torch.Tensor], block_k: int, bshd: bool, window_left: int = -1,
                  window_right: int = -1, softcap: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor]:
    window = window_left >= 0 or window_right >= 0
    if bshd:  # q, k, v: [B, S, H, D]; the kernel's view of them below is [B, H, S, D]
        reason = kernel_unavailable_reason(q.transpose(1, 2), k.transpose(1, 2), block_mask is not None, window=window,
                                           softcap=softcap > 0)
        if reason is None:
            return _C.forward(q.contiguous(), k.contiguous(), v.contiguous(), causal, scale, block_mask, block_k, True,
                              window_left, window_right, softcap)
        _fallback(reason)
        out, lse = reference.forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal, scale,
                                     block_mask, block_k, window_left, window_right, softcap)
        return out.transpose(1, 2).contiguous(), lse.contiguous()
    reason = kernel_unavailable_reason(q, k, block_mask is not None, window=window, softcap=softcap > 0)
    if reason is None:
        return _C.forward(q, k, v, causal, scale, block_mask, block_k, False, window_left, window_right, softcap)
    _fallback(reason)
    out, lse = reference.forward(q, k, v, causal, scale, block_mask, block_k, window_left, window_right, softcap)
    return out.contiguous(), lse.contiguous()


@attention_fwd.register_fake
def _(q, k, v, causal, scale, block_mask, block_k, bshd, window_left=-1, window_right=-1, softcap=0.0):
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    b, h, s = (q.shape[0], q.shape[2], q.shape[1]) if bshd else q.shape[:3]
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty((b, h, s), dtype=lse_dtype)


@torch.library.custom_op("flash_tutorial::attention_bwd", mutates_args=())
def attention_bwd(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                  lse: torch.Tensor, causal: bool, scale: float, block_mask: Optional[torch.Tensor],
                  block_k: int, bshd: bool, window_left: int = -1,
                  window_right: int = -1, softcap: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    window = window_left >= 0 or window_right >= 0
    if bshd:  # every tensor but lse: [B, S, H, D]; the kernel's view of them below is [B, H, S, D]
        reason = kernel_unavailable_reason(q.transpose(1, 2), k.transpose(1, 2), block_mask is not None, backward=True,
                                           window=window, softcap=softcap > 0)
        if reason is None:
            return _C.backward(dout, q, k, v, out, lse, causal, scale, block_mask, block_k, True, window_left,
                               window_right, softcap)
        _fallback(reason)
        t = [x.transpose(1, 2) for x in (dout, q, k, v, out)]
        grads = reference.backward(*t, lse, causal, scale, block_mask, block_k, window_left, window_right, softcap)
        return tuple(g.transpose(1, 2).contiguous() for g in grads)
    reason = kernel_unavailable_reason(q, k, block_mask is not None, backward=True, window=window, softcap=softcap > 0)
    if reason is None:
        return _C.backward(dout, q, k, v, out, lse, causal, scale, block_mask, block_k, False, window_left,
                           window_right, softcap)
    _fallback(reason)
    dq, dk, dv = reference.backward(dout, q, k, v, out, lse, causal, scale, block_mask, block_k, window_left,
                                    window_right, softcap)
    return dq.contiguous(), dk.contiguous(), dv.contiguous()


@attention_bwd.register_fake
def _(dout, q, k, v, out, lse, causal, scale, block_mask, block_k, bshd, window_left=-1, window_right=-1, softcap=0.0):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, block_mask, block_k, bshd, window_left, window_right, softcap = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.mark_non_differentiable(lse)  # LSE is for inspection: no gradient flows through it
    ctx.causal, ctx.scale, ctx.block_mask, ctx.block_k, ctx.bshd = causal, scale, block_mask, block_k, bshd
    ctx.window = (window_left, window_right)
    ctx.softcap = softcap


def _backward(ctx, dout, dlse):
    q, k, v, out, lse = ctx.saved_tensors
    has_mask = ctx.block_mask is not None
    # After a forward that read [B, S, H, D] in place (ctx.bshd), the backward does too where 08's
    # kernel takes it; else these are the copies of the bshd path (attention()'s docstring).
    in_place = ctx.bshd and reads_bshd(q, has_mask, backward=True)
    copies = ctx.bshd and not in_place
    if copies:
        q, k, v, out, dout = (t.transpose(1, 2).contiguous() for t in (q, k, v, out, dout))
    dq, dk, dv = attention_bwd(dout.contiguous(), q, k, v, out, lse, ctx.causal, ctx.scale, ctx.block_mask,
                               ctx.block_k, in_place, *ctx.window, ctx.softcap)
    if copies:
        dq, dk, dv = (t.transpose(1, 2) for t in (dq, dk, dv))
    return dq, dk, dv, None, None, None, None, None, None, None, None


attention_fwd.register_autograd(_backward, setup_context=_setup_context)
