"""Ring attention (Liu et al. 2023) over torch.distributed: one sequence split over the ranks of a
process group, each rank keeping its queries while the keys and values go round the ring.

    import flash_tutorial as ft
    q, k, v = (ft.zigzag_shard(t, dim=1, rank=rank, world=world) for t in (q_full, k_full, v_full))
    out = ft.ring_attention(q, k, v, causal=True)            # this rank's rows of O, [B, L, H, D]
    out.backward(dout_shard)                                 # dq, dk, dv of this rank's shard

The split (zig-zag, for causal balance): the sequence of S tokens is cut into 2W chunks, chunk c
holding tokens c S // 2W .. (c + 1) S // 2W - 1, and rank r keeps chunks r and 2W - 1 - r, in that
order (zigzag_shard). Under causal masking chunk c's queries see chunks 0 .. c, so rank r's pair
sees r + 1 + 2W - r = 2W + 1 chunks whatever r is: every rank does the same work. (Contiguous
blocks would leave rank 0 one block to attend and rank W - 1 all of them.)

Forward: W steps. In step s rank r holds the K/V block of rank (r - s) mod W; it starts sending that
block on to rank r + 1 and receiving the next from rank r - 1 (batch_isend_irecv), then attends its
two query chunks to the block's two key chunks: each (query chunk, key chunk) pair is one call of
the op's forward (ops.attention_fwd: the chapters' kernels on a GPU, the reference elsewhere), full
where the key chunk comes before the query chunk, causal on the diagonal, skipped after it (or full
everywhere without causal). The pairs' outputs merge exactly by their LSEs, as chapter 10's combine
merges split-KV pieces: O = (e^LSE_a O_a + e^LSE_b O_b) / (e^LSE_a + e^LSE_b), in float32.

Backward: the same ring with the gradients of K and V travelling with their block: in step s rank r
adds its queries' contributions to the visiting block's dK and dV (the op's backward on each pair,
with the final O and LSE, which make each pair's gradient exactly that pair's share), sends block
and gradients on, and after W steps every block's dK and dV arrive back at their own rank. dQ stays
home. The sums are float32, and so are the pairs' parts where chapter 11 runs them (_f32_parts):
the gradients are rounded to the dtype once, at the end.

The group is any torch.distributed process group (NCCL on GPUs, one GPU a rank; Gloo on the CPU,
where python/tests/test_ring.py runs it with 1 to 4 processes against attention() on the whole
sequence). Self-attention only: q, k and v are shards of one sequence (Sq = Sk).
"""
import math
from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import ops


def chunk_bounds(seqlen: int, world: int) -> List[int]:
    """The zig-zag split's 2 * world + 1 chunk boundaries: chunk c is tokens bounds[c] .. bounds[c + 1] - 1."""
    n = 2 * world
    return [c * seqlen // n for c in range(n + 1)]


def rank_chunks(rank: int, world: int) -> Tuple[int, int]:
    """The two chunks rank `rank` keeps, in the order its shard holds them."""
    return rank, 2 * world - 1 - rank


def zigzag_shard(x: torch.Tensor, dim: int, rank: int, world: int) -> torch.Tensor:
    """Rank `rank`'s shard of a whole sequence along `dim`: chunks rank and 2 world - 1 - rank."""
    b = chunk_bounds(x.shape[dim], world)
    a, c = rank_chunks(rank, world)
    return torch.cat([x.narrow(dim, b[a], b[a + 1] - b[a]), x.narrow(dim, b[c], b[c + 1] - b[c])], dim)


def zigzag_unshard(shards: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    """The whole sequence from every rank's shard (shards[r] from rank r), zigzag_shard undone."""
    world = len(shards)
    b = chunk_bounds(sum(s.shape[dim] for s in shards), world)
    pieces = [None] * (2 * world)
    for r, s in enumerate(shards):
        a, c = rank_chunks(r, world)
        first = b[a + 1] - b[a]
        pieces[a], pieces[c] = s.narrow(dim, 0, first), s.narrow(dim, first, s.shape[dim] - first)
    return torch.cat(pieces, dim)


def _pair(q_chunk: int, k_chunk: int, causal: bool) -> Optional[bool]:
    """How query chunk q_chunk attends key chunk k_chunk: None (not at all: every key is after every
    query), False (every key, no mask) or True (the diagonal: the same tokens, causal)."""
    if not causal or k_chunk < q_chunk:
        return False
    return True if k_chunk == q_chunk else None


def _merge(out_acc, lse_acc, out, lse):
    """(out_acc, lse_acc) <- the exact softmax merge of itself with a piece (out, lse), in place.
    lse_acc uses -inf for rows that have seen no key yet; a piece's rows that saw none have LSE
    +inf (the op's convention) and weigh nothing."""
    lse = torch.where(torch.isposinf(lse), torch.full_like(lse, -math.inf), lse).to(lse_acc.dtype)
    m = torch.maximum(lse_acc, lse)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # both empty: keep the weights 0
    w_acc, w = torch.exp(lse_acc - m), torch.exp(lse - m)
    total = w_acc + w
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out_acc.mul_((w_acc / safe)[..., None]).add_(out.to(out_acc.dtype) * (w / safe)[..., None])
    lse_acc.copy_(torch.where(total > 0, m + torch.log(safe), torch.full_like(m, -math.inf)))


class _Ring:
    """One rank's place in the ring: its group, rank, world, the sequence's chunk boundaries."""

    def __init__(self, group, seqlen: int):
        self.group = group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        self.bounds = chunk_bounds(seqlen, self.world)

    def sizes(self, owner: int) -> Tuple[int, int]:
        a, c = rank_chunks(owner, self.world)
        return self.bounds[a + 1] - self.bounds[a], self.bounds[c + 1] - self.bounds[c]

    def chunks(self, t: torch.Tensor, owner: int) -> List[Tuple[int, torch.Tensor]]:
        """[B, H, L, D] (or [B, H, L]) t of `owner`'s block as its two (chunk index, contiguous chunk)."""
        first, second = self.sizes(owner)
        a, c = rank_chunks(owner, self.world)
        return [(a, t.narrow(2, 0, first).contiguous()), (c, t.narrow(2, first, second).contiguous())]

    def shift(self, tensors: Sequence[torch.Tensor], incoming_owner: int):
        """Starts sending `tensors` (a block of this rank's current owner, [B, H, L, ...]) to the next
        rank and receiving the previous rank's, of block `incoming_owner`; returns the receive
        buffers and the requests to wait on."""
        rows = sum(self.sizes(incoming_owner))
        received = [t.new_empty(t.shape[:2] + (rows,) + t.shape[3:]) for t in tensors]
        peer = lambda r: dist.get_global_rank(self.group, r) if self.group is not None else r  # noqa: E731
        nxt, prv = peer((self.rank + 1) % self.world), peer((self.rank - 1) % self.world)
        p2p = [dist.P2POp(dist.isend, t.contiguous(), nxt, self.group) for t in tensors]
        p2p += [dist.P2POp(dist.irecv, t, prv, self.group) for t in received]
        return received, dist.batch_isend_irecv(p2p)


def _wait(requests):
    for r in requests:
        r.wait()


def _f32_parts(q):
    """Whether chapter 11 runs this ring's pairs (Hopper, f16 or bf16; q [B, H, L, D]), so that
    their dQ, dK and dV can come in float32, unrounded (_C.backward_f32): rounded to the dtype, each
    of a row's parts would add a rounding of its own to the sum."""
    return q.dtype in (torch.float16, torch.bfloat16) and ops.chapters(q)[1] == "11_backward_v3"


def _pair_grads(d_c, q_c, k_c, v_c, o_c, l_c, causal, scale, f32_parts):
    """A chunk pair's dQ, dK and dV, for the sums: float32 where f32_parts (_f32_parts), else the
    op's backward."""
    if f32_parts:
        return ops._C.backward_f32(d_c, q_c, k_c, v_c, o_c, l_c, causal, scale)
    return ops.attention_bwd(d_c, q_c, k_c, v_c, o_c, l_c, causal, scale, None, 128, False)


class _RingAttention(torch.autograd.Function):
    """q, k, v: this rank's [B, H, L, D] shards (contiguous); returns O [B, H, L, D] and LSE [B, H, L]."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, ring):
        acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        q_chunks = ring.chunks(q, ring.rank)
        out_acc = [torch.zeros(c.shape, dtype=acc_dtype, device=q.device) for _, c in q_chunks]
        lse_acc = [torch.full(c.shape[:3], -math.inf, dtype=acc_dtype, device=q.device) for _, c in q_chunks]
        block, owner = (k, v), ring.rank
        for step in range(ring.world):
            incoming = (owner - 1) % ring.world
            if step + 1 < ring.world:  # the next block travels while this one is attended
                received, requests = ring.shift(block, incoming)
            kv = list(zip(ring.chunks(block[0], owner), ring.chunks(block[1], owner)))  # copied once a step
            for (qc, q_c), o_acc, l_acc in zip(q_chunks, out_acc, lse_acc):
                for (kc, k_c), (_, v_c) in kv:
                    diagonal = _pair(qc, kc, causal)
                    if diagonal is None or q_c.shape[2] == 0 or k_c.shape[2] == 0:
                        continue
                    out, lse = ops.attention_fwd(q_c, k_c, v_c, diagonal, scale, None, 128, False)
                    _merge(o_acc, l_acc, out, lse)
            if step + 1 < ring.world:
                _wait(requests)
                block, owner = tuple(received), incoming
        out = torch.cat(out_acc, dim=2).to(q.dtype)
        lse = torch.cat(lse_acc, dim=2)
        lse = torch.where(torch.isneginf(lse), torch.full_like(lse, math.inf), lse)  # no key seen: +inf
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.ring = causal, scale, ring
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        ring, causal, scale = ctx.ring, ctx.causal, ctx.scale
        acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        f32_parts = _f32_parts(q)
        rows = [(qc, q_c, o_c, l_c, d_c) for (qc, q_c), (_, o_c), (_, l_c), (_, d_c) in
                zip(ring.chunks(q, ring.rank), ring.chunks(out, ring.rank), ring.chunks(lse, ring.rank),
                    ring.chunks(dout.contiguous(), ring.rank))]
        dq_acc = [torch.zeros(q_c.shape, dtype=acc_dtype, device=q.device) for _, q_c, _, _, _ in rows]
        block, owner = (k, v), ring.rank
        grads = (torch.zeros(k.shape, dtype=acc_dtype, device=k.device),
                 torch.zeros(v.shape, dtype=acc_dtype, device=v.device))
        for step in range(ring.world):
            incoming = (owner - 1) % ring.world
            if step + 1 < ring.world:  # the next block's K and V travel while this one is worked on
                received, requests = ring.shift(block, incoming)
            first, _ = ring.sizes(owner)
            kv = list(zip(ring.chunks(block[0], owner), ring.chunks(block[1], owner)))  # copied once a step
            for (i, (qc, q_c, o_c, l_c, d_c)) in enumerate(rows):
                for j, ((kc, k_c), (_, v_c)) in enumerate(kv):
                    diagonal = _pair(qc, kc, causal)
                    if diagonal is None or q_c.shape[2] == 0 or k_c.shape[2] == 0:
                        continue
                    dq, dk, dv = _pair_grads(d_c, q_c, k_c, v_c, o_c, l_c, diagonal, scale, f32_parts)
                    dq_acc[i] += dq
                    start = 0 if j == 0 else first
                    grads[0].narrow(2, start, k_c.shape[2]).add_(dk)
                    grads[1].narrow(2, start, v_c.shape[2]).add_(dv)
            if ring.world == 1:
                break  # the block never leaves: its gradients are this rank's own
            # The block's gradients go on with it; after the last step they reach their own rank.
            grads_in, grad_requests = ring.shift(grads, incoming)
            if step + 1 < ring.world:
                _wait(requests)
                block = tuple(received)
            _wait(grad_requests)
            grads, owner = tuple(grads_in), incoming
        dq = torch.cat(dq_acc, dim=2).to(q.dtype)
        return dq, grads[0].to(k.dtype), grads[1].to(v.dtype), None, None, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   scale: Optional[float] = None, layout: str = "bshd", group=None, seqlen: Optional[int] = None,
                   return_lse: bool = False):
    """Attention over a sequence split across the ranks of `group` (default: the whole world), each
    rank holding its zig-zag shard of q, k and v (zigzag_shard): [B, L, H, D] ("bshd") or
    [B, H, L, D] ("bhsd"), Hkv heads for k and v (GQA). Returns this rank's rows of O in q's layout,
    and with return_lse=True its LSE [B, H, L]; differentiable in q, k and v. seqlen: the whole
    sequence's length, else the sum of the shards' lengths (one all_reduce). Every rank calls it
    with the same causal, scale, layout and head counts."""
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"flash_tutorial.ring_attention: layout must be 'bshd' or 'bhsd', not {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"flash_tutorial.ring_attention: {name} must be a 4-D tensor ({layout})")
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("flash_tutorial.ring_attention: needs torch.distributed initialized "
                         "(dist.init_process_group), one process per rank of the ring")
    s = 1 if layout == "bshd" else 2
    if not (q.shape[s] == k.shape[s] == v.shape[s]):
        raise ValueError(f"flash_tutorial.ring_attention: q, k and v must be shards of one sequence (self-attention), "
                         f"got lengths {q.shape[s]}, {k.shape[s]}, {v.shape[s]}")
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = (t.contiguous() for t in (q, k, v))
    if seqlen is None:
        total = torch.tensor([q.shape[2]], dtype=torch.int64, device=q.device)
        dist.all_reduce(total, group=group)
        seqlen = int(total.item())
    ring = _Ring(group, seqlen)
    if q.shape[2] != sum(ring.sizes(ring.rank)):
        raise ValueError(f"flash_tutorial.ring_attention: rank {ring.rank} holds {q.shape[2]} tokens, but its zig-zag "
                         f"shard of {seqlen} tokens over {ring.world} ranks has {sum(ring.sizes(ring.rank))} "
                         "(zigzag_shard makes it)")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    out, lse = _RingAttention.apply(q, k, v, bool(causal), float(scale), ring)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out
