#!/usr/bin/env python3
"""Session 19: why 08's 3xTF32 backward failed dV on the large-logit tests (docs/pending/README.md).

A host emulation, numpy only, of one head of the tests' large-logit problem (Sq = Sk = 700, causal,
Q and K of standard deviation 12): the scores as an fp32 FFMA chain, as 3xTF32 mma summed from zero
per 8-long step and added in fp32 ("fresh"), and fed straight through the accumulator; each mma
modelled as the exact sum of its products and the accumulator, truncated toward zero to fp32 (the
small parts truncated to TF32). For each, the forward's LSE as the kernels form it and the
backward's P from it, then dV = P^T dO (exact, and as a 3xTF32 product), against float64.

  python3 docs/pending/emulate_3xtf32_pair.py [D] [seed]

What it printed (D = 64, seed 1; D = 128, seed 2): with the scores of one arithmetic in both
passes the largest dV error is 7.2e-5 - 2.0e-4 for every 3xTF32 variant (the FFMA pair 1.07e-4 and
1.8e-4); with the forward's LSE from FFMA-chain scores and the backward's scores in 3xTF32 it is
1.02e-3 and 1.03e-3 -- the size the kernel showed (1.07e-3, 1.37e-3). The backward tests upload
O and LSE from the host reference, whose scores are the FFMA chain (common/reference.cpp,
fp32_score_forward), which is that second case; hence `BackwardChapter::tests_own_forward` in
exp_08_tf32x3.patch.
"""
import sys

import numpy as np
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
D = int(sys.argv[1]) if len(sys.argv) > 1 else 64
Sq = Sk = 700
Q = (rng.standard_normal((Sq, D)).astype(np.float32) * np.float32(12))
K = (rng.standard_normal((Sk, D)).astype(np.float32) * np.float32(12))
dO = rng.standard_normal((Sq, D)).astype(np.float32)
scale = np.float32(1.0 / np.sqrt(D))
c = np.float32(scale * np.float32(np.log2(np.e)))
mask = np.tril(np.ones((Sq, Sk), bool))

def rz32(x):  # float64 -> float32 toward zero
    f = x.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f[over] = np.nextafter(f[over], np.float32(0))
    return f
def tf32_rna(x):
    b = x.view(np.uint32).astype(np.uint64)
    b = ((b + 0x1000) & ~np.uint64(0x1FFF)).astype(np.uint32)
    return b.view(np.float32)
def tf32_trunc(x):
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)

def s_ffma(Q, K):
    S = np.zeros((Q.shape[0], K.shape[0]), np.float32)
    for d in range(Q.shape[1]):
        S = (np.outer(Q[:, d].astype(np.float64), K[:, d]) + S).astype(np.float32)
    return S
def mm_3xtf32(A, B, fresh=True, small_round=False):
    """A (M, K) @ B (K, N) as 3xTF32 mma over 8-long k steps: each step's three products summed
    from zero and added in fp32 (fresh), or fed straight through the accumulator."""
    Ab, Bb = tf32_rna(A), tf32_rna(B)
    As, Bs = (tf32_rna(A - Ab), tf32_rna(B - Bb)) if small_round else (tf32_trunc(A - Ab), tf32_trunc(B - Bb))
    out = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k0 in range(0, A.shape[1], 8):
        sl = slice(k0, k0 + 8)
        x = np.zeros_like(out) if fresh else out
        x = rz32(x.astype(np.float64) + As[:, sl].astype(np.float64) @ Bb[sl].astype(np.float64))
        x = rz32(x.astype(np.float64) + Ab[:, sl].astype(np.float64) @ Bs[sl].astype(np.float64))
        x = rz32(x.astype(np.float64) + Ab[:, sl].astype(np.float64) @ Bb[sl].astype(np.float64))
        out = (out.astype(np.float64) + x).astype(np.float32) if fresh else x
    return out
def s_3xtf32(Q, K, **kw):
    return mm_3xtf32(Q, np.ascontiguousarray(K.T), **kw)

def pair_dv(S_fwd, S_bwd=None):
    """The forward's LSE from S_fwd as the kernels form it, the backward's P from S_bwd (the same
    scores unless given), and dV = P^T dO exactly."""
    S_bwd = S_fwd if S_bwd is None else S_bwd
    Sm = np.where(mask, S_fwd, -np.inf).astype(np.float32)
    m = Sm.max(axis=1)
    m_scaled = (m.astype(np.float64) * c).astype(np.float32)
    P_f = np.exp2(((Sm.astype(np.float64) * c) - m_scaled[:, None]).astype(np.float32).astype(np.float64)).astype(np.float32)
    l = P_f.astype(np.float64).sum(axis=1).astype(np.float32)
    lse = ((m_scaled.astype(np.float64) + np.log2(l.astype(np.float64))) * np.log(2)).astype(np.float32)
    lse2 = lse.astype(np.float64) * np.log2(np.e)
    hi = lse2.astype(np.float32); lo = (lse2 - hi).astype(np.float32)
    Sb = np.where(mask, S_bwd, -np.inf).astype(np.float32)
    t = (Sb.astype(np.float64) * c - hi[:, None]).astype(np.float32)  # fmaf(s, c, -hi)
    P = np.exp2((t.astype(np.float64) - lo[:, None]).astype(np.float32).astype(np.float64))
    P = np.where(mask, P, 0.0)
    return P.T @ dO.astype(np.float64), P

S64 = Q.astype(np.float64) @ K.T.astype(np.float64)
Sm64 = np.where(mask, S64 * float(scale), -np.inf)
P64 = np.exp(Sm64 - Sm64.max(axis=1, keepdims=True)); P64 /= P64.sum(axis=1, keepdims=True)
dV64 = P64.T @ dO.astype(np.float64)
Sf, Sffma, Sstraight = s_3xtf32(Q, K), s_ffma(Q, K), s_3xtf32(Q, K, fresh=False)
for name, S in [("ffma", Sffma), ("3xtf32 fresh", Sf), ("3xtf32 straight", Sstraight),
                ("3xtf32 fresh, small rounded", s_3xtf32(Q, K, small_round=True))]:
    dV, P = pair_dv(S)
    err = np.abs(dV - dV64)
    sErr = np.abs(S.astype(np.float64) - S64)[mask]
    print(f"D={D} {name:28s} S err max {sErr.max():.3g} rms {np.sqrt((sErr**2).mean()):.3g} | dV err max {err.max():.3g} | P err max {np.abs(P-P64).max():.3g}")
for name, a, b in [("fwd tf32x3, bwd ffma", Sf, Sffma), ("fwd tf32x3 fresh, bwd straight", Sf, Sstraight)]:
    dV, P = pair_dv(a, b)
    print(f"D={D} {name:32s} dV err max {np.abs(dV - dV64).max():.3g}")
# the dV product in 3xTF32, fresh per 8 queries, with the consistent tf32x3 P
_, P = pair_dv(Sf)
Sq8 = (Sq + 7) // 8 * 8
Pp = np.zeros((Sk, Sq8), np.float32); Pp[:, :Sq] = P.astype(np.float32).T
dOp = np.zeros((Sq8, D), np.float32); dOp[:Sq] = dO
dV3 = mm_3xtf32(Pp, dOp)
print(f"D={D} consistent tf32x3 pair, dV product in 3xTF32: dV err max {np.abs(dV3 - dV64).max():.3g}")
