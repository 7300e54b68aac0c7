"""The op against PyTorch's scaled_dot_product_attention and a float64 reference (pytest).

CPU tests exercise the reference path (the fallback); the CUDA tests run the kernels where the
extension is built and a GPU is present, and skip with the reason otherwise.
    python3 -m pytest python/tests -q
"""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import flash_tutorial as ft
from flash_tutorial import ops, reference

SHAPES = [  # batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim
    (1, 1, 1, 1, 1, 8),
    (2, 4, 4, 17, 17, 64),
    (1, 8, 2, 127, 127, 32),
    (2, 6, 1, 33, 70, 16),   # MQA, Sq < Sk
    (1, 4, 2, 70, 33, 24),   # Sq > Sk: under causal masking the first rows see no key
]


def make(b, h, hkv, sq, sk, d, dtype=torch.float32, layout="bhsd", seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(b, h, sq, d), (b, hkv, sk, d), (b, hkv, sk, d)]
    ts = [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]
    if layout == "bshd":
        ts = [t.transpose(1, 2).contiguous() for t in ts]
    return ts


def seeded_like(t, seed):
    """Seeded standard normal values of t's shape, dtype and device (an upstream gradient)."""
    return torch.randn(t.shape, generator=torch.Generator().manual_seed(seed)).to(t)


def reference64(q, k, v, causal, scale, window=(-1, -1), softcap=0.0):
    """Attention in float64 from the definition, head by head, written apart from the package's
    reference so that the two cannot share a mistake ([B, H, S, D]): query head h reads KV head
    h // (H // Hkv); query i sees key j iff j <= i + Sk - Sq (causal) and, with a window (L, R),
    i + Sk - Sq - L <= j <= i + Sk - Sq + R (a side at -1: unbounded); a row with no key: O = 0,
    LSE = +inf. softcap c > 0: the scores are c tanh(scale q.k / c)."""
    b, h, sq, _ = q.shape
    group, sk = h // k.shape[1], k.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full((b, h, sq), float("inf"), dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            kk, vv = k[bi, hi // group].double(), v[bi, hi // group].double()
            s = scale * (q[bi, hi].double() @ kk.T)
            if softcap > 0:
                s = softcap * torch.tanh(s / softcap)
            for i in range(sq):
                at = i + sk - sq  # the row's position among the keys
                keys = [j for j in range(sk) if (not causal or j <= at) and (window[0] < 0 or j >= at - window[0])
                        and (window[1] < 0 or j <= at + window[1])]
                if keys:
                    row = s[i, keys]
                    lse[bi, hi, i] = torch.logsumexp(row, 0)
                    out[bi, hi, i] = torch.softmax(row, 0) @ vv[keys]
    return out, lse


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_forward_matches_float64(shape, causal, layout):
    q, k, v = make(*shape, layout=layout)
    out, lse = ft.attention(q, k, v, causal=causal, layout=layout, return_lse=True)
    if layout == "bshd":
        q, k, v, out = (t.transpose(1, 2) for t in (q, k, v, out))
    want, want_lse = reference64(q, k, v, causal, 1 / math.sqrt(shape[-1]))
    # float32 arithmetic against float64: softmax rows sum to 1 and |V| ~ 1, so 1e-5 absolute covers
    # float32's rounding over sums of up to 127 terms with room, and catches any wrong index or scale.
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)
    assert out.shape == (shape[0], shape[1], shape[3], shape[5])


@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_sdpa(causal):
    # Sq == Sk, where SDPA's causal mask (top-left aligned) and ours (bottom-right) agree.
    q, k, v = make(2, 8, 2, 65, 65, 32)
    out = ft.attention(q, k, v, causal=causal, layout="bhsd")
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(out, want, atol=2e-6, rtol=2e-5)


def test_rows_without_keys():
    q, k, v = make(1, 2, 2, 9, 4, 8)  # causal with Sq > Sk: rows 0..4 see no key
    out, lse = ft.attention(q, k, v, causal=True, layout="bhsd", return_lse=True)
    assert torch.all(out[:, :, :5] == 0)
    assert torch.all(torch.isinf(lse[:, :, :5])) and torch.all(lse[:, :, :5] > 0)
    assert torch.all(torch.isfinite(lse[:, :, 5:]))
    assert not torch.isnan(out).any()


WINDOWS = [(0, 0), (3, -1), (-1, 2), (5, 1), (16, 0)]


@pytest.mark.parametrize("shape", SHAPES[1:])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("causal", [False, True])
def test_window_matches_float64(shape, window, causal):
    q, k, v = make(*shape)
    out, lse = ft.attention(q, k, v, causal=causal, layout="bhsd", return_lse=True, window=window)
    want, want_lse = reference64(q, k, v, causal, 1 / math.sqrt(shape[-1]), window)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)  # test_forward_matches_float64's bound
    torch.testing.assert_close(lse.double(), want_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES[1:])
@pytest.mark.parametrize("causal, window", [(False, (-1, -1)), (True, (-1, -1)), (True, (5, 0))])
def test_softcap_matches_float64(shape, causal, window):
    # Large logits (inputs x 4), where the cap changes the softmax: c = 5 against scores up to ~30.
    q, k, v = (4 * t for t in make(*shape))
    scale = 1 / math.sqrt(shape[-1])
    want, want_lse = reference64(q, k, v, causal, scale, window, softcap=5.0)
    got, lse = ft.attention(q, k, v, causal=causal, layout="bhsd", return_lse=True, window=window, softcap=5.0)
    torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(lse.double(), want_lse, atol=2e-5, rtol=2e-5)
    uncapped = ft.attention(q, k, v, causal=causal, layout="bhsd", window=window)
    assert not torch.allclose(uncapped, got, atol=1e-3), "the cap changed nothing: the test would not see it missing"


def test_window_unbounded_is_no_window():
    q, k, v = make(2, 4, 2, 33, 70, 16)
    assert torch.equal(ft.attention(q, k, v, causal=True, window=(-1, -1), layout="bhsd"),
                       ft.attention(q, k, v, causal=True, layout="bhsd"))


def packed(lens_q, lens_k, h, hkv, d, dtype=torch.float32, seed=0):
    """q [sum lens_q, H, D], k, v [sum lens_k, Hkv, D] and their cu_seqlens (int32)."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(sum(n), heads, d, generator=g, dtype=torch.float64).to(dtype)
               for n, heads in ((lens_q, h), (lens_k, hkv), (lens_k, hkv)))
    cu = [torch.tensor([0] + list(torch.tensor(n).cumsum(0).tolist()), dtype=torch.int32) for n in (lens_q, lens_k)]
    return q, k, v, cu[0], cu[1]


VARLEN_BATCHES = [  # lengths of the sequences' queries and keys
    ([5], [5]),
    ([3, 1, 17, 8], [3, 6, 17, 2]),      # Sq < Sk and Sq > Sk within one batch
    ([4, 0, 9], [7, 3, 0]),              # a sequence without queries, one without keys
]


@pytest.mark.parametrize("lens", VARLEN_BATCHES)
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (False, (2, 1)), (True, (4, -1))])
def test_varlen_matches_float64_per_sequence(lens, causal, window):
    q, k, v, cu_q, cu_k = packed(*lens, h=4, hkv=2, d=8)
    out, lse = ft.attention_varlen(q, k, v, cu_q, cu_k, max(lens[0]), max(lens[1]), causal=causal, window=window,
                                   return_lse=True)
    assert out.shape == q.shape and lse.shape == (4, q.shape[0])
    for b in range(len(lens[0])):
        q0, q1, k0, k1 = cu_q[b].item(), cu_q[b + 1].item(), cu_k[b].item(), cu_k[b + 1].item()
        if q1 == q0:
            continue
        qs, ks, vs = (t[None].transpose(1, 2) for t in (q[q0:q1], k[k0:k1], v[k0:k1]))  # [1, H, S, D]
        want, want_lse = reference64(qs, ks, vs, causal, 1 / math.sqrt(8), window or (-1, -1))
        torch.testing.assert_close(out[q0:q1].double(), want[0].transpose(0, 1), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(lse[:, q0:q1].double(), want_lse[0], atol=1e-5, rtol=1e-5)


def test_varlen_gradients_float64():
    q, k, v, cu_q, cu_k = packed([3, 2, 4], [2, 5, 4], h=2, hkv=1, d=4, dtype=torch.float64)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    torch.autograd.gradcheck(lambda q, k, v: ft.attention_varlen(q, k, v, cu_q, cu_k, causal=True), (q, k, v),
                             eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("bad, match", [
    (dict(cu_seqlens_q=torch.tensor([1, 5], dtype=torch.int32)), "start at 0"),
    (dict(cu_seqlens_q=torch.tensor([0, 4], dtype=torch.int32)), "end at"),
    (dict(cu_seqlens_q=torch.tensor([0, 4, 3, 5], dtype=torch.int32),
          cu_seqlens_k=torch.tensor([0, 1, 2, 6], dtype=torch.int32)), "never decrease"),
    (dict(cu_seqlens_q=torch.tensor([0.0, 5.0])), "int32"),
    (dict(cu_seqlens_k=torch.tensor([0, 2, 6], dtype=torch.int32)), "one batch"),
    (dict(max_seqlen_q=4), "max_seqlen"),
    (dict(q=torch.zeros(1, 5, 4, 8)), "3-D"),
    (dict(window=(-3, 0)), "window"),
])
def test_varlen_bad_input_is_refused(bad, match):
    args = dict(q=torch.zeros(5, 4, 8), k=torch.zeros(6, 2, 8), v=torch.zeros(6, 2, 8),
                cu_seqlens_q=torch.tensor([0, 5], dtype=torch.int32), cu_seqlens_k=torch.tensor([0, 6], dtype=torch.int32))
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        ft.attention_varlen(**args)


def test_varlen_offsets_changed_in_place_are_checked_again():
    # attention_varlen remembers the offsets it checked, by tensor and version: a tensor changed in
    # place is read and checked again, whether the change breaks it or moves a boundary.
    q, k, v, cu_q, cu_k = packed([3, 5], [4, 4], h=2, hkv=1, d=8)
    ft.attention_varlen(q, k, v, cu_q, cu_k)
    cu_q[1] = 9  # past the packed length
    with pytest.raises(ValueError, match="never decrease"):
        ft.attention_varlen(q, k, v, cu_q, cu_k)
    cu_q[1] = 5  # sequences of 5 and 3 queries now
    out = ft.attention_varlen(q, k, v, cu_q, cu_k)
    want = ft.attention_varlen(q, k, v, cu_q.clone(), cu_k.clone())
    assert torch.equal(out, want)
    first = ft.attention(q[None, :5], k[None, :4], v[None, :4], layout="bshd")[0]
    torch.testing.assert_close(out[:5], first, atol=1e-6, rtol=1e-6)


GRAD_SHAPES = [  # small: gradcheck builds whole Jacobians (inputs x outputs)
    (1, 1, 1, 1, 1, 8),
    (1, 2, 2, 5, 5, 4),
    (2, 4, 2, 6, 9, 4),   # GQA, Sq < Sk
    (1, 2, 1, 7, 3, 4),   # MQA, Sq > Sk: rows without keys under causal masking
]


@pytest.mark.parametrize("shape", GRAD_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_float64(shape, causal):
    # gradcheck compares the op's backward (the reference backward's formulas) with finite
    # differences of its forward, in float64, GQA included.
    q, k, v = (t.double().requires_grad_() for t in make(*shape))
    torch.autograd.gradcheck(lambda q, k, v: ft.attention(q, k, v, causal=causal, layout="bhsd"), (q, k, v),
                             eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shape", GRAD_SHAPES[1:])
@pytest.mark.parametrize("window", [(1, 0), (2, 1)])
def test_gradients_float64_window(shape, window):
    q, k, v = (t.double().requires_grad_() for t in make(*shape))
    torch.autograd.gradcheck(lambda q, k, v: ft.attention(q, k, v, layout="bhsd", window=window), (q, k, v),
                             eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shape", GRAD_SHAPES[1:])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_float64_softcap(shape, causal):
    q, k, v = (3 * t.double() for t in make(*shape))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    torch.autograd.gradcheck(lambda q, k, v: ft.attention(q, k, v, causal=causal, layout="bhsd", softcap=2.0),
                             (q, k, v), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_gradients_match_sdpa_gqa():
    q, k, v = (t.requires_grad_() for t in make(2, 8, 2, 40, 40, 16))
    dout = torch.randn(2, 8, 40, 16, generator=torch.Generator().manual_seed(5))
    ours = torch.autograd.grad(ft.attention(q, k, v, causal=True, layout="bhsd"), (q, k, v), dout)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), (q, k, v), dout)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("block_k", [64, 128])
def test_block_mask(block_k):
    b, h, sq, sk = 2, 2, 300, 400
    q, k, v = make(b, h, h, sq, sk, 16)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand(b, h, math.ceil(sq / 128), math.ceil(sk / block_k), generator=g) < 0.5
    mask[0, 0, 1] = False  # a whole query block sees nothing
    out, lse = ft.attention(q, k, v, block_mask=mask, block_k=block_k, layout="bhsd", return_lse=True)
    # Element mask by hand, then float64 attention with it.
    qi = torch.arange(sq)[:, None] // 128
    kj = torch.arange(sk)[None, :] // block_k
    vis = mask[:, :, qi, kj]  # [B, H, Sq, Sk]
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(16)
    s = s.masked_fill(~vis, float("-inf"))
    seen = vis.any(-1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    torch.testing.assert_close(out.double(), p @ v.double(), atol=1e-5, rtol=1e-5)
    assert torch.all(torch.isinf(lse[~seen])) and torch.all(torch.isfinite(lse[seen]))
    assert torch.all(out[0, 0, 128:256] == 0)


def test_lse_carries_no_gradient():
    q, k, v = (t.requires_grad_() for t in make(1, 2, 2, 8, 8, 8))
    out, lse = ft.attention(q, k, v, layout="bhsd", return_lse=True)
    assert out.requires_grad and not lse.requires_grad


def test_same_call_same_bits():
    q, k, v = make(2, 4, 2, 50, 60, 32)
    a = ft.attention(q, k, v, causal=True, layout="bhsd")
    b = ft.attention(q, k, v, causal=True, layout="bhsd")
    assert torch.equal(a, b)


@pytest.mark.parametrize("bad, match", [
    (dict(layout="bsdh"), "layout"),
    (dict(q=torch.zeros(2, 3, 4)), "4-D"),
    (dict(k=torch.zeros(1, 3, 3, 8), v=torch.zeros(1, 3, 3, 8)), "multiple of the KV heads"),
    (dict(k=torch.zeros(1, 3, 2, 16), v=torch.zeros(1, 3, 2, 16)), "head dim"),
    (dict(v=torch.zeros(1, 3, 2, 4)), "one shape"),
    (dict(block_mask=torch.ones(1, 4, 1, 1)), "block_mask"),
    (dict(block_mask=torch.ones(1, 4, 1, 1, dtype=torch.bool), block_k=32), "block_k"),
    (dict(window=(-2, 0)), "window"),
    (dict(window=(3,)), "window"),
    (dict(window=(1.5, 0)), "window"),
    (dict(softcap=-1.0), "softcap"),
    (dict(softcap=float("nan")), "softcap"),
    (dict(softcap=True), "softcap"),
])
def test_bad_input_is_refused(bad, match):
    args = dict(q=torch.zeros(1, 5, 4, 8), k=torch.zeros(1, 3, 2, 8), v=torch.zeros(1, 3, 2, 8))
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        ft.attention(**args)


def test_fallback_warns_with_the_reason():
    if ops.kernel_unavailable_reason(torch.zeros(1)) is None:
        pytest.skip("the kernels run here: no fallback to warn about")
    ops._warned.clear()
    q, k, v = make(1, 2, 2, 4, 4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ft.attention(q, k, v)
    ours = [w for w in caught if "running the PyTorch reference" in str(w.message)]
    assert ours, "no fallback warning"
    assert ours[0].filename == __file__, f"the warning points at {ours[0].filename}, not at the caller"
    assert ft.kernel_unavailable_reason(q.transpose(1, 2)) in str(ours[0].message)


class TinyAttention(torch.nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)  # [B, S, H, D]
        return ft.attention(q, k, v, causal=True).reshape(b, s, d)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])  # inductor: the default, generating code around the op
def test_torch_compile_traces_the_op(backend):
    torch.manual_seed(0)
    model = TinyAttention()
    x = torch.randn(2, 24, 32, requires_grad=True)
    eager = model(x)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    got = compiled(x)
    torch.testing.assert_close(got, eager)
    (g_eager,) = torch.autograd.grad(eager.sum(), x)
    (g_compiled,) = torch.autograd.grad(compiled(x).sum(), x)
    torch.testing.assert_close(g_compiled, g_eager)


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the kernel path is not tested here")


def kernels_or_skip(q, k, has_mask=False):
    """[B, H, S, D] q, k on the GPU: skip, with the reason, unless the kernels run both passes."""
    reason = ops.kernel_unavailable_reason(q, k, has_mask, backward=True)
    if reason is not None:
        pytest.skip(reason)


HOPPER_HEAD_DIMS = (64, 96, 128, 192, 256)  # the head dims both 09 and 11 take


def on_hopper(q, head_dim):
    """Whether 09's forward and 11's backward run a float16/bfloat16 call at this head dim."""
    return torch.cuda.get_device_capability(q.device) == (9, 0) and head_dim in HOPPER_HEAD_DIMS


def close(got, want, tol, what):
    """Largest error against the largest reference value: the kernels round to their dtype."""
    err = (got.double().cpu() - want).abs().max().item()
    scale = max(want.abs().max().item(), 1e-30)
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol} x {scale:.3g}"


# The kernels' rounding: bf16 keeps 8 bits, f16 11; sums of up to 333 rounded products. The fp32
# kernels (05, 08 fp32) agree with float64 to ~1e-6 of the largest value.
KERNEL_TOL = {torch.bfloat16: 3e-2, torch.float16: 5e-3, torch.float32: 1e-4}


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", HOPPER_HEAD_DIMS)
def test_cuda_kernels_forward_and_backward(dtype, causal, head_dim):
    # [B, S, H, D] inputs (read in place by 06's forward and 08's f16/bf16 backward; copied to
    # [B, H, S, D] for 05, 08's fp32 kernel, and on Hopper 09 and 11), GQA, Sq != Sk.
    q, k, v = (t.cuda().requires_grad_() for t in make(2, 8, 2, 300, 333, head_dim, dtype=dtype, layout="bshd"))
    kernels_or_skip(q.transpose(1, 2), k.transpose(1, 2))
    check_forward_and_backward(q, k, v, dtype, causal)


def test_torch_compile_asks_the_extension_nothing_while_tracing(monkeypatch):
    # On a GPU, attention() asks the extension which kernels run; a call into C++ while Dynamo traces
    # would break the graph, and fullgraph=True would fail there (not on the CPU, where the answer
    # comes before any such call). Asked while tracing, these two raise here; at run time the op asks
    # them as usual.
    def refuse_while_tracing(real):
        def ask(*args, **kwargs):
            if torch.compiler.is_compiling():
                raise AssertionError("the extension was asked while tracing")
            return real(*args, **kwargs)
        return ask

    monkeypatch.setattr(ops, "kernel_unavailable_reason", refuse_while_tracing(ops.kernel_unavailable_reason))
    monkeypatch.setattr(ops, "reads_bshd", refuse_while_tracing(ops.reads_bshd))
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = TinyAttention()
    x = torch.randn(2, 24, 32, requires_grad=True)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), model(x))
    (g_compiled,) = torch.autograd.grad(compiled(x).sum(), x)
    (g_eager,) = torch.autograd.grad(model(x).sum(), x)
    torch.testing.assert_close(g_compiled, g_eager)


def check_forward_and_backward(q, k, v, dtype, causal, window=(-1, -1)):
    """attention() on [B, S, H, D] CUDA tensors, forward and backward, against the reference in float64."""
    out, lse = ft.attention(q, k, v, causal=causal, return_lse=True, window=window)
    dout = seeded_like(out, 7)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    scale = 1 / math.sqrt(q.shape[-1])
    q64, k64, v64 = (t.detach().double().cpu().transpose(1, 2) for t in (q, k, v))
    o64, lse64 = reference.forward(q64, k64, v64, causal, scale, None, 128, *window)
    g64 = reference.backward(dout.double().cpu().transpose(1, 2), q64, k64, v64, o64, lse64, causal, scale, None, 128,
                             *window)
    tol = KERNEL_TOL[dtype]
    close(out.transpose(1, 2), o64, tol, "O")
    close(lse, lse64, 1e-4, "LSE")
    for name, g, w in zip(("dQ", "dK", "dV"), grads, g64):
        close(g.transpose(1, 2), w, 2 * tol, name)


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("window, causal", [((64, 0), True), ((100, 37), False), ((0, 130), False)])
@pytest.mark.parametrize("head_dim", HOPPER_HEAD_DIMS)
def test_cuda_window_forward_and_backward(dtype, window, causal, head_dim):
    # On a Hopper GPU 09's forward and 11's backward take the window; elsewhere the call falls back
    # to the reference (skipped here: the CPU tests cover it). GQA, Sq != Sk.
    q, k, v = (t.cuda().requires_grad_() for t in make(2, 8, 2, 300, 333, head_dim, dtype=dtype, layout="bshd"))
    reason = ops.kernel_unavailable_reason(q.transpose(1, 2), k.transpose(1, 2), backward=True, window=True)
    if reason is not None:
        pytest.skip(reason)
    check_forward_and_backward(q, k, v, dtype, causal, window)


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_varlen_forward_and_backward(dtype):
    # The kernels that run each sequence (09 and 11 on Hopper at bf16; 05 and 08 at f32), on a
    # packed batch with GQA, a sequence without keys and causal masking, against the reference.
    q, k, v, cu_q, cu_k = packed([100, 1, 257, 30], [130, 0, 257, 64], h=8, hkv=2, d=64, dtype=dtype)
    q, k, v = (t.cuda().requires_grad_() for t in (q, k, v))
    kernels_or_skip(q[None].transpose(1, 2), k[None].transpose(1, 2))
    out, lse = ft.attention_varlen(q, k, v, cu_q.cuda(), cu_k.cuda(), causal=True, return_lse=True)
    dout = seeded_like(out, 6)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    q64, k64, v64, do64 = (t.detach().double().cpu() for t in (q, k, v, dout))
    ref = ft.attention_varlen(*(t.requires_grad_() for t in (q64, k64, v64)), cu_q, cu_k, causal=True)
    g64 = torch.autograd.grad(ref, (q64, k64, v64), do64)
    tol = KERNEL_TOL[dtype]
    close(out, ref.detach(), tol, "O")
    assert torch.isinf(lse[:, 100]).all() and torch.isfinite(lse[:, :100]).all()
    for name, g, w in zip(("dQ", "dK", "dV"), grads, g64):
        close(g, w, 2 * tol, name)


@cuda
@pytest.mark.parametrize("head_dim", HOPPER_HEAD_DIMS)
@pytest.mark.parametrize("window", [None, (40, 0)])
def test_cuda_varlen_one_launch(head_dim, window):
    # Without a gradient, on Hopper, one launch of 09 walks every sequence (ops.takes_varlen): its O
    # and LSE against the float64 reference sequence by sequence, with an empty sequence, one without
    # keys, GQA, causal masking and a window; the same call twice gives the same bits.
    q, k, v, cu_q, cu_k = packed([100, 0, 1, 257, 30, 700], [130, 5, 0, 257, 64, 700], h=8, hkv=2, d=head_dim,
                                 dtype=torch.bfloat16)
    q, k, v = (t.cuda() for t in (q, k, v))
    if not ops.takes_varlen(q):
        pytest.skip("no kernel here runs a packed batch in one launch (09 on Hopper)")
    with torch.no_grad():
        out, lse = ft.attention_varlen(q, k, v, cu_q.cuda(), cu_k.cuda(), causal=True, window=window, return_lse=True)
        again, _ = ft.attention_varlen(q, k, v, cu_q.cuda(), cu_k.cuda(), causal=True, window=window, return_lse=True)
    assert torch.equal(out, again)
    ref, ref_lse = ft.attention_varlen(*(t.double().cpu() for t in (q, k, v)), cu_q, cu_k, causal=True, window=window,
                                       return_lse=True)
    close(out, ref, KERNEL_TOL[torch.bfloat16], "O")
    assert torch.isinf(lse[:, 100]).all()  # the sequence of one query and no keys
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), finite)
    torch.testing.assert_close(lse.cpu()[finite].double(), ref_lse[finite], atol=1e-3, rtol=1e-4)


@cuda
@pytest.mark.parametrize("head_dim", HOPPER_HEAD_DIMS)
@pytest.mark.parametrize("window", [None, (40, 0)])
def test_cuda_varlen_backward_one_launch(head_dim, window):
    # With a gradient, on Hopper, one launch of 11 walks every sequence's key tiles
    # (ops.takes_varlen(backward=True)): dQ, dK and dV against the float64 reference sequence by
    # sequence, with an empty sequence, one without keys, one without queries, GQA, causal masking
    # and a window. dK and dV are the same bits twice (each written once); dQ's fp32 sums arrive in
    # the order the blocks run.
    q, k, v, cu_q, cu_k = packed([100, 0, 1, 257, 0, 700], [130, 5, 0, 257, 64, 700], h=8, hkv=2, d=head_dim,
                                 dtype=torch.bfloat16)
    q, k, v = (t.cuda().requires_grad_() for t in (q, k, v))
    if not ops.takes_varlen(q, backward=True):
        pytest.skip("no kernel here runs a packed batch's backward in one launch (11 on Hopper)")
    out = ft.attention_varlen(q, k, v, cu_q.cuda(), cu_k.cuda(), causal=True, window=window)
    dout = seeded_like(out, 6)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    again = torch.autograd.grad(ft.attention_varlen(q, k, v, cu_q.cuda(), cu_k.cuda(), causal=True, window=window),
                                (q, k, v), dout)
    assert torch.equal(grads[1], again[1]) and torch.equal(grads[2], again[2])
    q64, k64, v64, do64 = (t.detach().double().cpu().requires_grad_() for t in (q, k, v, dout))
    ref = ft.attention_varlen(q64, k64, v64, cu_q, cu_k, causal=True, window=window)
    g64 = torch.autograd.grad(ref, (q64, k64, v64), do64.detach())
    tol = KERNEL_TOL[torch.bfloat16]
    close(out, ref.detach(), tol, "O")
    for name, g, w in zip(("dQ", "dK", "dV"), grads, g64):
        assert torch.isfinite(g).all(), name
        close(g, w, 2 * tol, name)
    assert (grads[1][130:135] == 0).all()  # the keys of the sequence without queries
    assert (grads[1][135 + 257:135 + 257 + 64] == 0).all()


@cuda
@pytest.mark.parametrize("head_dim", [32, 64, 80, 96, 128, 192, 256])
def test_cuda_chapters_per_gpu(head_dim):
    # A Hopper GPU runs 09's forward and 11's backward at the head dims both take (f16, bf16, no
    # block mask); other GPUs and head dims run 06 and 08, and a block mask 07 and 08.
    q = torch.zeros(1, 2, 8, head_dim, device="cuda", dtype=torch.bfloat16)
    if ops._C is None:
        pytest.skip(ops.kernel_unavailable_reason(q))
    hopper = on_hopper(q, head_dim)
    assert ops.chapters(q) == (("09_flash_v3", "11_backward_v3") if hopper else ("06_tensor_core", "08_backward"))
    assert ops.chapters(q, has_mask=True) == ("07_block_sparse", "08_backward")
    assert ops.chapters(q.float()) == ("05_flash_v2", "08_backward")


@cuda
@pytest.mark.parametrize("head_dim", [64, 128])
def test_cuda_graph_capture(head_dim):
    # A forward and backward captured in a CUDA graph (PyTorch's recipe: warm-up calls on a side
    # stream, then the capture) and replayed on new values copied into the captured inputs: the
    # same O and LSE bits as an eager call on those values (the kernels are deterministic but for
    # dQ's atomics; dQ by a tolerance). The scratch of the backward comes from PyTorch's allocator,
    # the graph's private pool during the capture.
    q, k, v = (t.cuda().requires_grad_() for t in make(2, 8, 2, 300, 333, head_dim, dtype=torch.bfloat16,
                                                         layout="bshd"))
    kernels_or_skip(q.transpose(1, 2), k.transpose(1, 2))
    dout = seeded_like(q, 12)

    def step():
        out, lse = ft.attention(q, k, v, causal=True, return_lse=True)
        return (out, lse, *torch.autograd.grad(out, (q, k, v), dout))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    fresh = [t.detach() for t in make(2, 8, 2, 300, 333, head_dim, dtype=torch.bfloat16, layout="bshd", seed=5)]
    with torch.no_grad():
        for dst, src in zip((q, k, v), fresh):
            dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    eager = step()
    for name, got, want in zip(("O", "LSE", "dQ", "dK", "dV"), captured, eager):
        if name == "dQ":
            close(got, want.double().cpu(), KERNEL_TOL[torch.bfloat16] / 4, "dQ replayed against eager")
        else:
            assert torch.equal(got, want), f"{name}: the replayed graph and an eager call differ"


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [64, 128, 96, 256, 80])
@pytest.mark.parametrize("window", [(-1, -1), (40, 0)])
def test_cuda_softcap(dtype, head_dim, window):
    # A logit softcap of 5 on logits scaled up 4x (most scores near the cap, the tanh far from
    # linear): on a Hopper GPU, 09's forward and 11's backward run it, with no warning; O, LSE and
    # the gradients match float64 (the backward by twice the forward's tolerance, as the other
    # gradient tests), dK and dV are the same bits twice (dQ is summed by atomics), and the custom
    # op (torch.compile's path) gives the fast path's O and LSE bits. Elsewhere (head dim 80, other
    # GPUs) the reference runs it and warns once, naming what the kernels refuse (with a window at
    # head dim 80 that is the window, which 06 refuses first).
    q, k, v = (t.cuda() for t in make(2, 4, 2, 300, 333, head_dim, dtype=dtype, seed=3))
    kernels_or_skip(q, k)
    q, k = 4 * q, 4 * k
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    hopper = on_hopper(q, head_dim)
    has_window = window != (-1, -1)
    reason = ops.kernel_unavailable_reason(q, k, backward=True, window=has_window, softcap=True)
    assert (reason is None) == hopper, reason
    ops._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, lse = ft.attention(q, k, v, causal=True, layout="bhsd", return_lse=True, window=window, softcap=5.0)
        dout = seeded_like(out, 9)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    warned = any("running the PyTorch reference" in str(w.message) for w in caught)
    assert warned != hopper, "a fallback warning where the kernels run it" if hopper else "no fallback warning"
    if not hopper:
        assert any(reason in str(w.message) for w in caught), f"no warning naming {reason!r}"
    q64, k64, v64 = (t.detach().double().cpu().requires_grad_() for t in (q, k, v))
    scale = 1 / math.sqrt(head_dim)
    with torch.no_grad():
        want, want_lse = reference64(q64, k64, v64, True, scale, window, softcap=5.0)
    # The gradients' yardstick: the op's float64 reference path on the CPU (checked against
    # reference64 by gradcheck in test_gradients_float64_softcap).
    ref = ft.attention(q64, k64, v64, causal=True, layout="bhsd", window=window, softcap=5.0)
    g64 = torch.autograd.grad(ref, (q64, k64, v64), dout.double().cpu())
    tol = KERNEL_TOL[dtype]
    close(out, want.detach(), tol, "O with a softcap")
    close(lse, want_lse, 1e-4, "LSE with a softcap")
    for name, g, w in zip(("dQ", "dK", "dV"), grads, g64):
        assert torch.isfinite(g).all(), name
        close(g, w, 2 * tol, f"{name} with a softcap")
    if hopper:
        again = torch.autograd.grad(ft.attention(q, k, v, causal=True, layout="bhsd", window=window, softcap=5.0),
                                    (q, k, v), dout)
        assert torch.equal(grads[1], again[1]) and torch.equal(grads[2], again[2]), "dK or dV differ between calls"
        out2, lse2 = ops.attention_fwd(q, k, v, True, scale, None, 128, False, *window, 5.0)
        assert torch.equal(out, out2) and torch.equal(lse, lse2), "the fast path and the custom op differ"


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("window", [(-1, -1), (40, 0)])
def test_cuda_fast_path_equals_the_custom_ops(dtype, window):
    # In eager mode attention() calls _C.attention, whose autograd is in C++; the custom ops of ops.py
    # (torch.compile's path) run the same kernels on the same tensors: the same bits, but for dQ,
    # which the backwards sum by atomics in whatever order the blocks come (compared by a tolerance).
    q, k, v = (t.cuda().requires_grad_() for t in make(2, 8, 2, 300, 333, 64, dtype=dtype))
    kernels_or_skip(q, k)
    has_window = window != (-1, -1)
    if ops.kernel_unavailable_reason(q, backward=True, window=has_window) is not None:
        pytest.skip(ops.kernel_unavailable_reason(q, backward=True, window=has_window))
    assert ops.fast_path(q, False, has_window)
    out, lse = ft.attention(q, k, v, causal=True, layout="bhsd", return_lse=True, window=window)
    out2, lse2 = ops.attention_fwd(q, k, v, True, 1 / math.sqrt(64), None, 128, False, *window)
    assert torch.equal(out, out2) and torch.equal(lse, lse2), "the fast path and the custom op differ"
    dout = seeded_like(out, 8)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads2 = torch.autograd.grad(out2, (q, k, v), dout)
    assert torch.equal(grads[1], grads2[1]) and torch.equal(grads[2], grads2[2]), "dK or dV differ"
    close(grads[0], grads2[0].double().cpu(), KERNEL_TOL[dtype] / 4, "dQ of the fast path against the custom op")


@cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [96, 64, 128])
@pytest.mark.parametrize("fused", [False, True])
def test_cuda_bshd_read_in_place(dtype, causal, head_dim, fused):
    # The forward (09 on a Hopper GPU, else 06) and the backward (11, or 08's
    # tensor-core kernel) read [B, S, H, D] through their strides: O, dQ, dK and dV come back
    # contiguous in that layout, with the same bits as the same inputs copied to [B, H, S, D] first
    # (the same kernels, the same order of operations; only the addresses differ). dQ is summed by
    # atomics in whatever order the blocks come, so it is compared by a tolerance. fused: q, k, v
    # are slices of one [B, S, 3, H, D] tensor (a fused QKV projection; H = Hkv here), not
    # contiguous, which attention() copies into contiguous [B, S, H, D] tensors first.
    hkv = 6 if fused else 2
    q, k, v = (t.cuda() for t in make(2, 6, hkv, 257, 257 if fused else 300, head_dim, dtype=dtype, layout="bshd"))
    if fused:
        q, k, v = torch.stack((q, k, v), dim=2).unbind(2)
        assert not q.is_contiguous()
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    kernels_or_skip(q.transpose(1, 2), k.transpose(1, 2))
    out, lse = ft.attention(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.is_contiguous(), "O should be a contiguous [B, S, H, D] tensor"
    dout = seeded_like(out, 10)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    for name, g in zip(("dQ", "dK", "dV"), grads):
        assert g.is_contiguous(), f"{name} should be written as a contiguous [B, S, H, D] tensor, not a view"
    given = [t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v)]
    ref, ref_lse = ft.attention(*given, causal=causal, layout="bhsd", return_lse=True)
    ref_grads = torch.autograd.grad(ref, given, dout.transpose(1, 2).contiguous())
    assert torch.equal(out, ref.transpose(1, 2)), "bshd in place and bhsd differ"
    assert torch.equal(lse, ref_lse)
    assert torch.equal(grads[1], ref_grads[1].transpose(1, 2)), "dK: bshd in place and bhsd differ"
    assert torch.equal(grads[2], ref_grads[2].transpose(1, 2)), "dV: bshd in place and bhsd differ"
    close(grads[0], ref_grads[0].transpose(1, 2).double().cpu(), KERNEL_TOL[dtype] / 4, "dQ against bhsd")


@cuda
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_cuda_kernels_block_mask(layout):
    # bshd: 07's forward reads [B, S, H, D] in place; 08's block-sparse backward takes copies.
    b, h, sq, sk, d = 1, 4, 300, 400, 64
    given = [t.cuda().requires_grad_() for t in make(b, h, 2, sq, sk, d, dtype=torch.bfloat16, layout=layout)]
    q, k, v = (t.transpose(1, 2) for t in given) if layout == "bshd" else given  # [B, H, S, D] views
    kernels_or_skip(q, k, has_mask=True)
    mask = torch.rand(b, h, math.ceil(sq / 128), math.ceil(sk / 128), generator=torch.Generator().manual_seed(4)) < 0.6
    out = ft.attention(*given, block_mask=mask.cuda(), layout=layout)
    dout = seeded_like(out, 11)
    grads = torch.autograd.grad(out, given, dout)
    if layout == "bshd":
        assert out.is_contiguous(), "07 should write O as a contiguous [B, S, H, D] tensor"
        out, dout = out.transpose(1, 2), dout.transpose(1, 2)
        grads = [g.transpose(1, 2) for g in grads]
    q64, k64, v64 = (t.detach().double().cpu() for t in (q, k, v))
    o64, lse64 = reference.forward(q64, k64, v64, False, 1 / 8, mask, 128)
    g64 = reference.backward(dout.double().cpu(), q64, k64, v64, o64, lse64, False, 1 / 8, mask, 128)
    close(out, o64, KERNEL_TOL[torch.bfloat16], "O")
    for name, g, w in zip(("dQ", "dK", "dV"), grads, g64):
        close(g, w, 2 * KERNEL_TOL[torch.bfloat16], name)
