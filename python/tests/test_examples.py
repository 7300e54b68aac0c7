"""The examples on the CPU (pytest): train_gpt.py's packed documents (--pack), bench_hf.py's kernel split.

    PYTHONPATH=python python3 -m pytest python/tests/test_examples.py -q
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PYTHON = Path(__file__).resolve().parents[1]  # python/: the package and examples/
sys.path.insert(0, str(PYTHON / "examples"))
import train_gpt  # noqa: E402

# train_gpt.py's CPU smoke test (its docstring) without --attn and --out.
SMOKE = ["--device", "cpu", "--steps", "6", "--eval-every", "3", "--eval-batches", "2", "--batch", "4",
         "--context", "32", "--layers", "2", "--d-model", "64", "--heads", "2", "--bench-steps", "2"]


def train_gpt_run(tmp_path, *argv):
    """train_gpt.py with argv in tmp_path (where relative --out files land): the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PYTHON), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(PYTHON / "examples" / "train_gpt.py"), *argv], env=env,
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)


def run_train_gpt(tmp_path, *argv):
    """The smoke command with argv, which must succeed."""
    run = train_gpt_run(tmp_path, *SMOKE, *argv)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


@pytest.mark.parametrize("attn", ["tutorial", "sdpa"])
def test_train_gpt_pack_smoke(attn, tmp_path):
    """The smoke command with --pack runs, gives finite losses and records the packing."""
    out = tmp_path / "run.json"
    run = run_train_gpt(tmp_path, "--attn", attn, "--pack", "--out", str(out))
    assert "packed, mean document" in run.stdout
    result = json.loads(out.read_text())
    assert result["pack"] is True
    assert 32 // 8 <= result["mean_doc_len"] < 32
    losses = [p[key] for p in result["curve"] for key in ("train_loss", "val_loss")]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses), losses


def test_train_gpt_in_turns_trains_each_model_as_alone(tmp_path):
    """--attn sdpa tutorial trains both models in turns of --turn-steps: each JSON file names the
    other attention, holds one tokens/s per timed turn, and its loss curve is the one the attention
    gives when it trains alone (each model has its own weights, optimizer and batch generator)."""
    run_train_gpt(tmp_path, "--attn", "sdpa", "tutorial", "--turn-steps", "2", "--out", "turns_{attn}.json")
    run_train_gpt(tmp_path, "--attn", "sdpa", "--out", "alone.json")
    turns = {attn: json.loads((tmp_path / f"turns_{attn}.json").read_text()) for attn in ("sdpa", "tutorial")}
    alone = json.loads((tmp_path / "alone.json").read_text())
    assert turns["sdpa"]["in_turns_with"] == ["tutorial"] and turns["tutorial"]["in_turns_with"] == ["sdpa"]
    assert alone["in_turns_with"] == []
    # 6 steps, the first 3 untimed (half of a short run): turns of 2 steps are timed in steps 4 and 5-6
    assert all(len(r["turns_tokens_per_s"]) == 2 for r in turns.values())
    assert all(r["train_tokens_per_s"] > 0 and r["infer_tokens_per_s"] > 0 for r in (*turns.values(), alone))
    assert turns["sdpa"]["curve"] == alone["curve"]  # bit for bit: the turns change nothing it computes
    for a, b in zip(turns["sdpa"]["curve"], turns["tutorial"]["curve"]):
        assert a["step"] == b["step"] and math.isclose(a["val_loss"], b["val_loss"], rel_tol=1e-4), (a, b)


def test_train_gpt_refuses_one_out_file_for_several_attentions(tmp_path):
    run = train_gpt_run(tmp_path, "--attn", "sdpa", "tutorial", "--out", "gpt.json")
    assert run.returncode == 2 and "must contain {attn}" in run.stderr


def test_pack_documents_cover_each_row():
    """Documents tile every row, never cross a row's end, and are at least context // 8 long except
    each row's last (cut to fit); the same generator state gives the same documents."""
    batch, context = 5, 40
    docs = train_gpt.pack_documents(batch, context, torch.Generator().manual_seed(3), torch.device("cpu"))
    again = train_gpt.pack_documents(batch, context, torch.Generator().manual_seed(3), torch.device("cpu"))
    assert torch.equal(docs.cu_seqlens, again.cu_seqlens)
    assert docs.cu_seqlens.dtype == torch.int32 and torch.equal(docs.cu_seqlens, docs.cu_seqlens_cpu)
    bounds = docs.cu_seqlens.tolist()
    assert bounds[0] == 0 and bounds[-1] == batch * context
    assert docs.max_seqlen == max(b - a for a, b in zip(bounds[:-1], bounds[1:]))
    for row in range(batch):
        row_bounds = [b for b in bounds if row * context <= b <= (row + 1) * context]
        assert row_bounds[0] == row * context and row_bounds[-1] == (row + 1) * context
        lengths = [b - a for a, b in zip(row_bounds[:-1], row_bounds[1:])]
        assert all(context // 8 <= n <= context for n in lengths[:-1]) and lengths[-1] >= 1, lengths
    assert len(bounds) - 1 > batch  # some row holds more than one document


def packed_args(attn):
    return train_gpt.parse_args(["--attn", attn, *SMOKE, "--pack", "--out", os.devnull])


def test_packed_attention_tutorial_matches_sdpa():
    """On one packed batch the tutorial's attention_varlen and SDPA once per document agree (float32),
    in the attention alone and in the model's logits (same seed, same weights); each document's
    attention sees only its own keys: its first document matches the unpacked row's first positions."""
    args = packed_args("tutorial")
    train_data, _, vocab = train_gpt.load_text()
    gen = torch.Generator().manual_seed(args.seed)
    x, y, docs = train_gpt.next_batch(train_data, args, gen, torch.device("cpu"))
    heads, head_dim = args.heads, args.d_model // args.heads
    total = args.batch * args.context
    q, k, v = torch.randn(3, total, heads, head_dim, generator=torch.Generator().manual_seed(1)).unbind(0)
    tutorial = train_gpt.tutorial_varlen_attention(q, k, v, docs)
    sdpa = train_gpt.sdpa_varlen_attention(q, k, v, docs)
    torch.testing.assert_close(tutorial, sdpa, rtol=1e-5, atol=1e-5)

    unpacked = train_gpt.sdpa_attention(*(t.view(args.batch, args.context, heads, head_dim) for t in (q, k, v)))
    unpacked = unpacked.reshape(total, heads, head_dim)
    cut = next(b for b in docs.cu_seqlens.tolist() if b % args.context)  # the first document ending mid-row
    row, end = cut - cut % args.context, cut - cut % args.context + args.context
    torch.testing.assert_close(sdpa[row:cut], unpacked[row:cut], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(sdpa[cut:end], unpacked[cut:end], atol=1e-3)  # the next document sees less

    logits = {}
    for attn in ("tutorial", "sdpa"):
        torch.manual_seed(args.seed)
        model = train_gpt.GPT(len(vocab), packed_args(attn)).eval()
        with torch.no_grad():
            logits[attn] = model(x, docs)
    torch.testing.assert_close(logits["tutorial"], logits["sdpa"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("signature", ["is_causal", "window_size", "neither"])
def test_causal_varlen_attn_reads_the_signature(signature, monkeypatch):
    """--attn sdpa --pack makes PyTorch's varlen_attn causal through whichever parameter it has
    (is_causal, window_size=(-1, 0)) and refuses one with neither."""
    varlen = pytest.importorskip("torch.nn.attention.varlen")
    calls = []

    def with_is_causal(q, k, v, cu_q, cu_k, max_q, max_k, *, is_causal=False):
        calls.append({"is_causal": is_causal})

    def with_window(q, k, v, cu_q, cu_k, max_q, max_k, *, window_size=(-1, -1)):
        calls.append({"window_size": window_size})

    def with_neither(q, k, v, cu_q, cu_k, max_q, max_k):
        calls.append({})

    fake = {"is_causal": with_is_causal, "window_size": with_window, "neither": with_neither}[signature]
    monkeypatch.setattr(varlen, "varlen_attn", fake)
    train_gpt.causal_varlen_attn.cache_clear()
    try:
        if signature == "neither":
            with pytest.raises(RuntimeError, match="neither is_causal nor window_size"):
                train_gpt.causal_varlen_attn()
        else:
            train_gpt.causal_varlen_attn()(None, None, None, None, None, 1, 1)
            assert calls == [{"is_causal": True} if signature == "is_causal" else {"window_size": (-1, 0)}]
    finally:
        train_gpt.causal_varlen_attn.cache_clear()


def test_bench_hf_splits_kernels_by_kind():
    """bench_hf.py --profile: each kernel counts once, as attention (the chapters', FlashAttention's,
    cuDNN's), a copy, or the rest, in ms a step."""
    import bench_hf
    kernels = {"void flash_v3::flash_v3_kernel<flash_v3::WsConfig<__nv_bfloat16, 128>>(...)": 4000.0,
               "void backward_v3::prepare_kernel<...>(...)": 600.0,
               "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128": 2000.0,
               "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)>": 1000.0,
               "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT": 2400.0}
    split = bench_hf.split_kernels(kernels, steps=2, top=3)
    assert split["busy_ms"] == pytest.approx(5.0)
    assert split["attention_ms"] == pytest.approx(3.3)
    assert split["copies_ms"] == pytest.approx(0.5)
    assert split["other_ms"] == pytest.approx(1.2)
    assert [(t, att) for _, t, att in split["top_kernels"]] == [(2.0, True), (1.2, False), (1.0, True)]
