"""The tutorial's attention kernels as a PyTorch op.

    from flash_tutorial import attention
    out = attention(q, k, v, causal=True)                 # [B, S, H, D] in, [B, S, H, D] out
    out, lse = attention(q, k, v, layout="bhsd", return_lse=True)

See python/README.md.
"""
import math
from typing import Optional, Tuple

import torch

from . import ops, reference  # noqa: F401  (ops registers the custom ops)
from .ring import ring_attention, zigzag_shard, zigzag_unshard  # attention over a ring of ranks (ring.py)

__all__ = ["attention", "attention_varlen", "kernel_unavailable_reason", "ring_attention", "zigzag_shard",
           "zigzag_unshard"]

# Why the CUDA kernels would not run a call on these tensors (None: they would), e.g.
# kernel_unavailable_reason(q) before a training run; python/README.md.
kernel_unavailable_reason = ops.kernel_unavailable_reason

LAYOUTS = ("bshd", "bhsd")


def _check_layout(q, k, v, layout):
    if layout not in LAYOUTS:
        raise ValueError(f"flash_tutorial.attention: layout must be one of {LAYOUTS}, not {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"flash_tutorial.attention: {name} must be a 4-D tensor ({layout}), got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")


def _check_window(window):
    """(left, right) as two ints, each -1 (unbounded) or >= 0; None: no window."""
    if window is None:
        return -1, -1
    if (not isinstance(window, (tuple, list)) or len(window) != 2
            or not all(isinstance(w, int) and not isinstance(w, bool) for w in window)):
        raise ValueError(f"flash_tutorial.attention: window must be a pair of ints (left, right), got {window!r}")
    left, right = window
    if left < -1 or right < -1:
        raise ValueError(f"flash_tutorial.attention: window sides must be >= 0, or -1 for unbounded, got {tuple(window)}")
    return left, right


def _check_softcap(softcap):
    """A logit softcap: a finite number >= 0 (0: off)."""
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not math.isfinite(softcap) or softcap < 0:
        raise ValueError(f"flash_tutorial.attention: softcap must be a finite number >= 0 (0: off), got {softcap!r}")
    return float(softcap)


def _check(q, k, v, block_mask, block_k):
    """On [B, H, S, D] views."""
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"flash_tutorial.attention: q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError("flash_tutorial.attention: q, k, v must be on one device")
    if not q.is_floating_point():
        raise ValueError(f"flash_tutorial.attention: floating-point tensors only, got {q.dtype}")
    b, h, sq, d = q.shape
    if k.shape != v.shape:
        raise ValueError(f"flash_tutorial.attention: k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    bk, hkv, sk, dk = k.shape
    if bk != b or dk != d:
        raise ValueError(f"flash_tutorial.attention: k, v must match q's batch ({b}) and head dim ({d}), "
                         f"got batch {bk} and head dim {dk}")
    if hkv < 1 or h % hkv:
        raise ValueError(f"flash_tutorial.attention: the query heads ({h}) must be a multiple of the KV heads ({hkv})")
    if min(sq, sk, d) < 1:
        raise ValueError("flash_tutorial.attention: seqlens and head dim must be >= 1")
    if block_mask is not None:
        if block_k not in (64, 128):
            raise ValueError(f"flash_tutorial.attention: block_k must be 64 or 128, not {block_k}")
        want = (b, h, math.ceil(sq / reference.BLOCK_Q), math.ceil(sk / block_k))
        if tuple(block_mask.shape) != want or block_mask.dtype != torch.bool:
            raise ValueError(f"flash_tutorial.attention: block_mask must be bool of shape {want} (blocks of "
                             f"{reference.BLOCK_Q} query rows x {block_k} keys), got {block_mask.dtype} "
                             f"{tuple(block_mask.shape)}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None, block_mask: Optional[torch.Tensor] = None,
              layout: str = "bshd", return_lse: bool = False, block_k: int = 128,
              window: Optional[Tuple[int, int]] = None, softcap: float = 0.0):
    """softmax(scale q k^T + mask) v, differentiable in q, k and v.

    q: [B, Sq, H, D] (layout "bshd") or [B, H, Sq, D] ("bhsd"); k, v: the same with Hkv heads and Sk
    keys, H a multiple of Hkv (GQA, MQA). causal: bottom-right aligned when Sq != Sk. scale: default
    1/sqrt(D). block_mask: bool [B, H, ceil(Sq/128), ceil(Sk/block_k)], False switches a block off.
    window: (left, right), a sliding window: query i sees keys i' - left .. i' + right, with
    i' = i + Sk - Sq (aligned as causal); -1 leaves a side unbounded, as FlashAttention's
    window_size. The kernels that take one are 09's forward and 11's backward (Hopper, float16 and
    bfloat16, head dims 64, 96, 128, 192, 256); elsewhere a window runs the reference, with a warning.
    softcap: a logit softcap c > 0 (Gemma 2's) turns the scores x = scale q k^T into c tanh(x / c)
    before the mask and the softmax; 0 (the default) leaves them. The kernels that take one are
    09's forward and 11's backward (Hopper, float16 and bfloat16, head dims 64 to 256); elsewhere
    a softcap runs the reference, with a warning.
    Returns O in q's layout, and with return_lse=True also LSE [B, H, Sq] (float32, natural log,
    +inf for a row that sees no key; for inspection, it carries no gradient).

    Copies: the float16 and bfloat16 forwards (09 on a Hopper GPU, else 06, or 07 under a block
    mask) read "bshd" inputs in place and write O as [B, Sq, H, D], contiguous. An input that is
    not contiguous, such as a slice of a fused QKV projection, goes to 09 and 11 as it lies (their
    tensor maps take any 16-byte-multiple strides) and is copied into a contiguous [B, S, H, D]
    tensor for the others. 05 (float32) reads [B, H, S, D] contiguous tensors: a "bshd" input is copied once
    into [B, H, S, D], and O comes back as a transposed view.
    After a forward that read "bshd" in place, the backward (11, or 08's tensor-core kernel) reads
    q, k, v, O and dO in place too, and writes dq, dk, dv as [B, S, H, D] (dO is copied only if
    autograd hands it over non-contiguous), except under a block mask: 08's block-sparse
    backward, like every other backward path, reads contiguous [B, H, S, D] copies.
    The reference fallback copies nothing extra.

    In eager mode, where the kernels run both passes and there is no block mask, the call goes to
    _C.attention, whose autograd is written in C++ (python/README.md: The eager fast path); under
    torch.compile, with a block mask, or where the reference runs, to the custom ops of ops.py.
    """
    _check_layout(q, k, v, layout)
    given = (q, k, v)
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # views: [B, H, S, D]
    _check(q, k, v, block_mask, block_k)
    left, right = _check_window(window)
    softcap = _check_softcap(softcap)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    has_window = left >= 0 or right >= 0
    # Under torch.compile nothing here asks the extension (a call into C++ would break the graph):
    # the op gets contiguous [B, H, S, D] tensors and decides between the kernels and the
    # reference when it runs.
    compiling = torch.compiler.is_compiling()
    reason = None if compiling else ops.kernel_unavailable_reason(q, k, block_mask is not None, window=has_window,
                                                                  softcap=softcap > 0)
    in_place = not compiling and layout == "bshd" and reason is None and ops.reads_bshd(q, block_mask is not None)
    if in_place:  # the chapter reads [B, S, H, D] as it lies: 09 and 11 through any strides their
        # tensor maps take (a fused QKV projection's slices), the others contiguous tensors only
        strided = ops.takes_input_strides(q, block_mask is not None)
        given = tuple(t if strided and ops.tma_friendly(t) else t.contiguous() for t in given)
    if ops.fast_path(q, block_mask is not None, has_window, softcap > 0):  # the same kernels, autograd in C++
        if in_place:
            out, lse = ops._C.attention(*given, bool(causal), float(scale), left, right, True, softcap)
        else:
            out, lse = ops._C.attention(q.contiguous(), k.contiguous(), v.contiguous(), bool(causal), float(scale),
                                        left, right, False, softcap)
            if layout == "bshd":
                out = out.transpose(1, 2)
        return (out, lse) if return_lse else out
    if in_place:
        out, lse = ops.attention_fwd(*given, bool(causal), float(scale), block_mask, int(block_k), True, left, right,
                                     softcap)
        return (out, lse) if return_lse else out
    if reason is None:  # the other kernels take contiguous [B, H, S, D]
        q, k, v = (t.contiguous() for t in (q, k, v))
    else:
        ops._fallback(reason, stacklevel=3)  # the warning points at the line that called attention()
    out, lse = ops.attention_fwd(q, k, v, bool(causal), float(scale), block_mask, int(block_k), False, left, right,
                                 softcap)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


def _check_cu_seqlens(name, cu, total, max_seqlen):
    """cu: int32/int64 [batch + 1] on any device, 0 first, non-decreasing, `total` last; returns it as a list."""
    if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.numel() < 2 or cu.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"flash_tutorial.attention_varlen: {name} must be a 1-D int32 tensor [batch + 1], got "
                         f"{cu.dtype if isinstance(cu, torch.Tensor) else type(cu).__name__} "
                         f"{tuple(cu.shape) if isinstance(cu, torch.Tensor) else ''}")
    bounds = cu.tolist()
    if bounds[0] != 0 or bounds[-1] != total or any(b > a for a, b in zip(bounds[1:], bounds[:-1])):
        raise ValueError(f"flash_tutorial.attention_varlen: {name} must start at 0, never decrease and end at the "
                         f"packed length {total}, got {bounds[:8]}{' ...' if len(bounds) > 8 else ''}")
    longest = max(b - a for a, b in zip(bounds[:-1], bounds[1:]))
    if max_seqlen is not None and max_seqlen < longest:
        raise ValueError(f"flash_tutorial.attention_varlen: max_seqlen for {name} is {max_seqlen}, but a sequence "
                         f"has {longest}")
    return bounds


# The offsets _check_cu_seqlens accepted lately, by tensor: a model passes one cu_seqlens to every
# layer (and often as both cu_seqlens_q and cu_seqlens_k), and reading and checking it costs more
# host time than the rest of the call. An entry holds the tensor itself (so its id cannot be
# reused while cached) and its version counter, which any in-place change bumps.
_cu_seqlens_seen = {}


def _checked_cu_seqlens(name, cu, total, max_seqlen):
    """_check_cu_seqlens, remembered for the last few tensors it accepted (not under torch.compile)."""
    if not isinstance(cu, torch.Tensor) or torch.compiler.is_compiling():
        return _check_cu_seqlens(name, cu, total, max_seqlen)
    key = (id(cu), cu._version, total, max_seqlen)
    seen = _cu_seqlens_seen.get(key)
    if seen is not None and seen[0] is cu:
        return seen[1]
    bounds = _check_cu_seqlens(name, cu, total, max_seqlen)
    if len(_cu_seqlens_seen) >= 8:
        _cu_seqlens_seen.clear()
    _cu_seqlens_seen[key] = (cu, bounds)
    return bounds


def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_seqlen_q: Optional[int] = None,
                     max_seqlen_k: Optional[int] = None, causal: bool = False, scale: Optional[float] = None,
                     window: Optional[Tuple[int, int]] = None, return_lse: bool = False, softcap: float = 0.0):
    """Attention over a batch of sequences of different lengths packed without padding
    (FlashAttention's varlen interface), differentiable in q, k and v.

    q: [total_q, H, D]; k, v: [total_k, Hkv, D]; sequence b owns query rows cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1] - 1 and keys cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 (int32 or int64,
    [batch + 1], starting at 0). max_seqlen_q / max_seqlen_k, when given, are checked against the
    longest sequence. causal, window and softcap apply within each sequence, aligned at its last key
    as in attention(). Returns O [total_q, H, D], and with return_lse=True LSE [H, total_q] (float32;
    +inf for a row that sees no key, such as the rows of a sequence with no keys).

    On Hopper (float16/bfloat16, the head dims 09 and 11 take, no softcap, outside torch.compile)
    one launch of 09 walks the tiles of every sequence, and in the backward one launch of 11.
    Elsewhere each sequence runs as one attention() call on views of the packed tensors
    ([1, S, H, D], read in place where the chapter takes that layout), so the kernels, the fallback
    and its warnings are attention()'s: a batch of many short sequences then costs one launch
    (forward and backward) per sequence.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise ValueError(f"flash_tutorial.attention_varlen: {name} must be a 3-D tensor [total, heads, head_dim], "
                             f"got {tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if k.shape != v.shape:
        raise ValueError(f"flash_tutorial.attention_varlen: k and v must have one shape, got {tuple(k.shape)} "
                         f"and {tuple(v.shape)}")
    bq = _checked_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_seqlen_q)
    bk = _checked_cu_seqlens("cu_seqlens_k", cu_seqlens_k, k.shape[0], max_seqlen_k)
    if len(bq) != len(bk):
        raise ValueError(f"flash_tutorial.attention_varlen: cu_seqlens_q and cu_seqlens_k must describe one batch, "
                         f"got {len(bq) - 1} and {len(bk) - 1} sequences")
    _check(q[None].transpose(1, 2), k[None].transpose(1, 2), v[None].transpose(1, 2), None, 128)
    left, right = _check_window(window)
    softcap = _check_softcap(softcap)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if (softcap == 0 and not torch.compiler.is_compiling() and ops.takes_varlen(q)
            and (not needs_grad or ops.takes_varlen(q, backward=True))):
        # One launch of 09 forward and of 11 backward, the autograd in C++ (as attention()'s fast path)
        out, lse = ops._C.attention_varlen(q, k, v, bq, bk, bool(causal), float(scale), left, right)
        return (out, lse) if return_lse else out
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32  # attention()'s LSE
    outs, lses = [], []
    for q0, q1, k0, k1 in zip(bq[:-1], bq[1:], bk[:-1], bk[1:]):
        if q1 == q0:
            continue
        if k1 == k0:  # rows that see no key: O = 0 (their gradient is 0), LSE = +inf
            outs.append(torch.zeros_like(q[q0:q1]))
            lses.append(torch.full((q.shape[1], q1 - q0), float("inf"), dtype=lse_dtype, device=q.device))
            continue
        out, lse = attention(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal=causal, scale=scale,
                             layout="bshd", return_lse=True, window=window, softcap=softcap)
        outs.append(out[0])
        lses.append(lse[0])
    out = torch.cat(outs) if outs else torch.zeros_like(q)
    lse = torch.cat(lses, dim=1) if lses else torch.zeros((q.shape[1], 0), dtype=lse_dtype, device=q.device)
    return (out, lse) if return_lse else out
