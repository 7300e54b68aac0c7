"""The PyTorch reference the op falls back to: plain attention, forward and backward, written out.

Conventions are the C++ chapters' (common/host/problem.h):
  * tensors [B, H, S, D]; K and V have Hkv heads, query head h reads KV head h // (H // Hkv);
  * causal masking is bottom-right aligned: query i sees key j iff j <= i + (Sk - Sq);
  * a sliding window (left, right), aligned the same way: query i sees key j iff
    i' - left <= j <= i' + right with i' = i + (Sk - Sq); -1 leaves that side unbounded
    (FlashAttention's window_size); causal and a window both apply where both are given;
  * a block mask [B, H, ceil(Sq / 128), ceil(Sk / block_k)] (bool, block_k 64 or 128) switches
    whole (query block, key block) pairs off, on top of causal masking (chapter 07);
  * a row that sees no key has O = 0 and LSE = +inf (so that P = exp(S - LSE) = 0 in the backward);
  * a logit softcap c > 0 (Gemma 2's) puts the scores through S = c tanh(x / c), x = scale Q K^T,
    before the mask and the softmax (common/host/reference.cpp's ReferenceOptions::softcap); 0: off.
The arithmetic runs in float32 (float64 for float64 inputs), the result in the inputs' dtype; LSE
is float32 (float64 for float64 inputs), natural log.
"""
import torch

BLOCK_Q = 128  # query rows per block-mask block: chapter 07's


def visible(sq, sk, causal, block_mask, block_k, device, window_left=-1, window_right=-1):
    """[B or 1, H or 1, Sq, Sk] bool: which keys each query row sees."""
    i = torch.arange(sq, device=device)[:, None] + (sk - sq)  # the row's position among the keys
    j = torch.arange(sk, device=device)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        vis = vis & (j <= i)
    if window_left >= 0:
        vis = vis & (j >= i - window_left)
    if window_right >= 0:
        vis = vis & (j <= i + window_right)
    vis = vis[None, None]
    if block_mask is not None:
        expanded = block_mask.bool().repeat_interleave(BLOCK_Q, dim=2)[:, :, :sq]
        expanded = expanded.repeat_interleave(block_k, dim=3)[:, :, :, :sk]
        vis = vis & expanded
    return vis


def _compute_dtype(t):
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _expand_kv(t, group):
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def _capped(x, softcap):
    """The scores from x = scale Q K^T: softcap tanh(x / softcap), or x itself without a cap."""
    return softcap * torch.tanh(x / softcap) if softcap > 0 else x


def forward(q, k, v, causal, scale, block_mask=None, block_k=128, window_left=-1, window_right=-1, softcap=0.0):
    """(O, LSE) for q [B, H, Sq, D], k and v [B, Hkv, Sk, D]."""
    ct = _compute_dtype(q)
    group = q.shape[1] // k.shape[1]
    kf, vf = _expand_kv(k.to(ct), group), _expand_kv(v.to(ct), group)
    s = _capped((q.to(ct) @ kf.transpose(-1, -2)) * scale, softcap)  # [B, H, Sq, Sk]
    vis = visible(q.shape[2], k.shape[2], causal, block_mask, block_k, q.device, window_left, window_right)
    s = s.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf where a row sees no key
    seen = torch.isfinite(lse)
    p = torch.exp(s - torch.where(seen, lse, torch.zeros_like(lse))[..., None])  # exp(-inf) = 0 where unseen
    out = p @ vf
    lse = torch.where(seen, lse, torch.full_like(lse, float("inf")))
    return out.to(q.dtype), lse


def backward(dout, q, k, v, out, lse, causal, scale, block_mask=None, block_k=128, window_left=-1, window_right=-1,
             softcap=0.0):
    """(dQ, dK, dV): FlashAttention's backward, on whole matrices. P is recomputed from LSE;
    dS = P o (dP - rowsum(dO o O)); with a softcap, dS times dS/dx = 1 - tanh(x / softcap)^2; dK
    and dV sum over the query heads sharing a KV head."""
    ct = _compute_dtype(q)
    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    group = h // hkv
    qf, dof, of = q.to(ct), dout.to(ct), out.to(ct)
    kf, vf = _expand_kv(k.to(ct), group), _expand_kv(v.to(ct), group)
    x = (qf @ kf.transpose(-1, -2)) * scale
    s = _capped(x, softcap)
    vis = visible(sq, sk, causal, block_mask, block_k, q.device, window_left, window_right)
    lse_f = lse.to(ct)
    p = torch.where(vis & torch.isfinite(lse_f)[..., None], torch.exp(s - lse_f[..., None]), torch.zeros_like(s))
    dv = p.transpose(-1, -2) @ dof                      # [B, H, Sk, D]
    dp = dof @ vf.transpose(-1, -2)                     # [B, H, Sq, Sk]
    delta = (dof * of).sum(dim=-1, keepdim=True)        # rowsum(dO o O)
    ds = p * (dp - delta)
    if softcap > 0:  # through the cap: d(c tanh(x / c))/dx = 1 - tanh(x / c)^2
        ds = ds * (1 - torch.tanh(x / softcap) ** 2)
    dq = (ds @ kf) * scale
    dk = (ds.transpose(-1, -2) @ qf) * scale
    if group > 1:  # the query heads of a group all read the same K, V: their shares add up
        dk = dk.view(b, hkv, group, sk, d).sum(dim=2)
        dv = dv.view(b, hkv, group, sk, d).sum(dim=2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
