#!/usr/bin/env python3
"""Train a small character-level GPT on Genesis and Exodus (KJV) with either PyTorch's
FlashAttention (SDPA) or the tutorial's kernels as the attention, and record loss curves and
throughput in a JSON file (plot several with plot_gpt.py).

On a GPU (from the repository root; build the extension first, python/README.md):

    PYTHONPATH=python python3 python/examples/train_gpt.py --attn sdpa tutorial --out gpt_{attn}.json

trains one model with each attention in the same process, in turns (below), and writes
gpt_sdpa.json and gpt_tutorial.json; `--attn tutorial --out gpt_tutorial.json` trains one alone.

A CPU smoke test (seconds):

    PYTHONPATH=python python3 python/examples/train_gpt.py --attn tutorial --device cpu --steps 6 \
        --eval-every 3 --eval-batches 2 --batch 4 --context 32 --layers 2 --d-model 64 --heads 2 \
        --bench-steps 2 --out /tmp/t.json

Add --pack for packed documents (below); python/tests/test_examples.py runs that with both attentions.

The model (nanoGPT-style, written out here): learned token and position embeddings, pre-LayerNorm
blocks (causal self-attention, then a 4x GELU MLP), a final LayerNorm and an untied output head.
q, k and v come from one Linear(d, 3d) as [B, S, H, Dh]; `--attn sdpa` runs
F.scaled_dot_product_attention on [B, H, S, D] views (restricted to the FlashAttention backend on
CUDA), `--attn tutorial` runs flash_tutorial.attention on the [B, S, H, D] tensors directly.
Dropout (off by default) acts on the residual branches only, never on attention probabilities,
so that both attentions compute the same function.

--pack cuts each [context] row into documents of lengths drawn uniformly from [context/8, context]
(the last cut to fit), drawn from the batches' generator right after each batch's windows, and
attention is causal within each document only: the rows go to FlashAttention's varlen interface
as [B * context, H, Dh] with the documents' cu_seqlens (--attn tutorial:
flash_tutorial.attention_varlen; --attn sdpa: torch.nn.attention.varlen.varlen_attn on CUDA in
f16/bf16, one F.scaled_dot_product_attention call per document on the CPU and in float32).
Positions stay the token's place in its row, and the loss stays next-token over the whole row: a
document's last token is trained to predict the next document's first, as in packed pretraining;
only attention cannot cross. The JSON records pack and mean_doc_len (tokens; --context unpacked).
Without --pack the generator draws the windows only, and every row is one causal sequence.

Same --seed, same run: the weights are initialised from torch.manual_seed(seed) and the training
batches come from a CPU torch.Generator seeded with it, whichever attention runs. Validation always
uses the same batches (a fixed generator, reset at each evaluation; with --pack the same
documents too), so val losses of different runs are measured on the same text. Training: AdamW
(betas 0.9, 0.95; weight decay on the 2-D weights only: linear and embedding matrices), gradient
clipping at 1.0, linear warm-up for 100 steps then cosine decay to lr/10. On CUDA the forward
runs under autocast (--dtype); on the CPU everything is float32.

Timing: training tokens/s over the steps after the first 20 (evaluation excluded, the GPU
synchronised at each timed boundary); inference tokens/s over --bench-steps forward passes of a
[batch, context] input under no_grad, after 5 warm-up passes.

Turns: this model's step is bound by the CPU (the GPU is busy about half of it), so its tokens/s
follow the host's speed, which drifts by more than the attentions differ: on one H200 machine
SDPA alone measured 1.03 M to 1.39 M training tokens/s in four separate runs. With several --attn
the models (the same weights and batches: each has its own generator with --seed) train in turns
of --turn-steps steps, the order reversed every round (A B, B A, A B, ...), so that each
attention's timed steps spread over the same stretch of time; inference alternates the same way,
in INFER_ROUNDS rounds. Each JSON file also records its turns' tokens/s ("turns_tokens_per_s"):
on an H200 machine consecutive turns of 100 steps (about 1.3 s) ranged from 1.03 M to 1.46 M
tokens/s for one attention, so the turns are short (25 steps) and the two attentions' turns
close together in time.
"""
import argparse
import functools
import inspect
import json
import math
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = Path(__file__).resolve().parent / "data" / "kjv_genesis_exodus.txt"
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
LR_WARMUP_STEPS = 100
TIMING_WARMUP_STEPS = 20   # training steps left out of the throughput
INFER_WARMUP_PASSES = 5
INFER_ROUNDS = 5           # with several --attn: inference passes in this many alternating rounds
GRAD_CLIP = 1.0
EVAL_SEED = 1234           # the validation batches: the same for every run


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--attn", dest="attns", nargs="+", choices=("sdpa", "tutorial"), required=True,
                   help="one attention, or several trained in turns in this process (Turns, above)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--pack", action="store_true",
                   help="cut each row into documents of random lengths and attend causally within each "
                        "document only (FlashAttention's varlen interface): --attn tutorial runs "
                        "flash_tutorial.attention_varlen; --attn sdpa runs PyTorch's "
                        "torch.nn.attention.varlen.varlen_attn on CUDA in f16/bf16, and elsewhere (the CPU, "
                        "--dtype f32) F.scaled_dot_product_attention once per document")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--bench-steps", type=int, default=50)
    p.add_argument("--turn-steps", type=int, default=25,
                   help="with several --attn: training steps an attention takes in each turn")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="bf16",
                   help="autocast dtype on CUDA (the CPU runs float32)")
    p.add_argument("--out", required=True,
                   help="the JSON file to write; with several --attn a pattern with {attn}, e.g. gpt_{attn}.json")
    args = p.parse_args(argv)
    if args.steps < 1 or args.eval_every < 1 or args.eval_batches < 1 or args.turn_steps < 1:
        p.error("--steps, --eval-every, --eval-batches and --turn-steps must be >= 1")
    if len(set(args.attns)) != len(args.attns):
        p.error(f"--attn names an attention twice: {' '.join(args.attns)}")
    if len(args.attns) > 1 and "{attn}" not in args.out:
        p.error(f"with several --attn, --out must contain {{attn}} (one file each), not {args.out!r}")
    args.attn = args.attns[0]  # the model's attention; main() gives each of several its own copy
    if args.d_model % args.heads:
        p.error(f"--d-model ({args.d_model}) must be a multiple of --heads ({args.heads})")
    return args


# ---------------------------------------------------------------- data

def load_text(path=DATA):
    """(train, val, vocab): the text as character ids, split 90% / 10%, and the sorted characters."""
    text = path.read_bytes().decode("ascii")
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    n_train = int(0.9 * len(data))
    return data[:n_train], data[n_train:], vocab


def get_batch(data, batch, context, gen, device):
    """Random windows of context+1 characters: inputs x and next-character targets y, [batch, context]."""
    starts = torch.randint(len(data) - context - 1, (batch,), generator=gen)
    windows = data[starts[:, None] + torch.arange(context + 1)]
    return windows[:, :-1].to(device), windows[:, 1:].to(device)


class Documents(NamedTuple):
    """A packed batch's document boundaries over the flattened [batch * context] tokens: document i
    owns tokens cu_seqlens[i] .. cu_seqlens[i + 1] - 1."""
    cu_seqlens: torch.Tensor      # int32 [n_docs + 1] on the model's device (varlen_attn reads it there)
    cu_seqlens_cpu: torch.Tensor  # the same on the CPU: read as a list without waiting for the GPU
    max_seqlen: int               # the longest document


def pack_documents(batch, context, gen, device):
    """Cuts each row of `context` tokens into documents of lengths drawn uniformly from
    [context // 8, context], the last one cut at the row's end (no document crosses rows)."""
    shortest = max(1, context // 8)
    draws = -(-context // shortest)  # enough documents to fill a row even when all are shortest
    lengths = torch.randint(shortest, context + 1, (batch, draws), generator=gen)  # [batch, draws]
    ends = lengths.cumsum(1)
    starts_inside = ends - lengths < context  # the documents that begin before the row ends
    ends = ends.clamp(max=context) + context * torch.arange(batch)[:, None]  # offsets in the flattened batch
    cu = torch.cat([torch.zeros(1, dtype=torch.int32), ends[starts_inside].int()])  # row by row, in order
    return Documents(cu.to(device), cu, int(cu.diff().max()))


def next_batch(data, args, gen, device):
    """(x, y, documents): get_batch's windows and, with --pack, their documents drawn from the same
    generator after them (documents None without --pack: the generator then draws the windows only)."""
    x, y = get_batch(data, args.batch, args.context, gen, device)
    return x, y, pack_documents(args.batch, args.context, gen, device) if args.pack else None


# ---------------------------------------------------------------- attention

def to_autocast_dtype(*ts):
    """Under autocast the Linear's output already has the autocast dtype; make sure of it."""
    device = ts[0].device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        ts = tuple(t.to(dtype) for t in ts)
    return ts


def sdpa_attention(q, k, v):
    """PyTorch's attention on [B, S, H, D] tensors; on CUDA its FlashAttention backend only
    (which takes f16 and bf16; float32 falls back to the memory-efficient backend)."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, S, D] views
    if not q.is_cuda:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = SDPBackend.EFFICIENT_ATTENTION if q.dtype == torch.float32 else SDPBackend.FLASH_ATTENTION
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)


def tutorial_attention(q, k, v):
    """The tutorial's kernels (or, where they cannot run, the package's PyTorch reference)."""
    from flash_tutorial import attention
    return attention(q, k, v, causal=True, layout="bshd")


ATTENTIONS = {"sdpa": sdpa_attention, "tutorial": tutorial_attention}


# With --pack: q, k, v are [total, H, D] (the batch's rows one after another) and attention is
# causal within each document of `docs` only.

@functools.cache
def causal_varlen_attn():
    """PyTorch's varlen_attn (torch.nn.attention.varlen) made causal. Its signature says how:
    is_causal=True where it has that parameter, window_size=(-1, 0) where it has a window instead."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError as e:
        raise RuntimeError(f"--attn sdpa --pack on CUDA needs torch.nn.attention.varlen.varlen_attn, which "
                           f"PyTorch {torch.__version__} does not have ({e}); run it with --dtype f32 (an SDPA "
                           f"call per document) or with --attn tutorial") from e
    params = inspect.signature(varlen_attn).parameters
    if "is_causal" in params:
        return functools.partial(varlen_attn, is_causal=True)
    if "window_size" in params:
        return functools.partial(varlen_attn, window_size=(-1, 0))
    raise RuntimeError(f"torch.nn.attention.varlen.varlen_attn in PyTorch {torch.__version__} takes neither "
                       f"is_causal nor window_size, so --attn sdpa --pack cannot make it causal: "
                       f"varlen_attn{inspect.signature(varlen_attn)}")


def sdpa_varlen_attention(q, k, v, docs):
    """PyTorch's varlen_attn on CUDA in float16 and bfloat16; elsewhere sdpa_attention once per
    document, on [1, S, H, D] views of the packed tensors."""
    if q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        cu, n = docs.cu_seqlens, docs.max_seqlen  # contiguous copies, as attention_varlen's kernels read
        return causal_varlen_attn()(q.contiguous(), k.contiguous(), v.contiguous(), cu, cu, n, n)
    bounds = docs.cu_seqlens_cpu.tolist()
    return torch.cat([sdpa_attention(q[None, a:b], k[None, a:b], v[None, a:b])[0]
                      for a, b in zip(bounds[:-1], bounds[1:])])


def tutorial_varlen_attention(q, k, v, docs):
    """flash_tutorial.attention_varlen: one launch each way of 09 and 11 on Hopper, one attention()
    call per document elsewhere (its docstring)."""
    from flash_tutorial import attention_varlen
    cu, n = docs.cu_seqlens_cpu, docs.max_seqlen  # it reads the offsets as a list (on the CPU: no sync)
    return attention_varlen(q, k, v, cu, cu, n, n, causal=True)


VARLEN_ATTENTIONS = {"sdpa": sdpa_varlen_attention, "tutorial": tutorial_varlen_attention}


# ---------------------------------------------------------------- model

class SelfAttention(nn.Module):
    def __init__(self, d_model, heads, attn, dropout):
        super().__init__()
        self.heads, self.attend, self.attend_varlen = heads, ATTENTIONS[attn], VARLEN_ATTENTIONS[attn]
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, docs=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).unbind(2)  # [B, S, H, Dh] each
        if docs is None:
            out = self.attend(*to_autocast_dtype(q, k, v))                          # [B, S, H, Dh]
        else:  # packed: [B * S, H, Dh] views, the rows one after another
            out = self.attend_varlen(*to_autocast_dtype(*(t.flatten(0, 1) for t in (q, k, v))), docs)
        return self.drop(self.proj(out.reshape(b, s, d)))


class Block(nn.Module):
    def __init__(self, d_model, heads, attn, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, heads, attn, dropout)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model), nn.Dropout(dropout))

    def forward(self, x, docs=None):
        x = x + self.attn(self.ln1(x), docs)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, args):
        super().__init__()
        d = args.d_model
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(args.context, d)
        self.drop = nn.Dropout(args.dropout)
        self.blocks = nn.ModuleList(Block(d, args.heads, args.attn, args.dropout) for _ in range(args.layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)  # untied from self.tok
        self.apply(self._init)
        for block in self.blocks:  # GPT-2: the residual projections scaled down with depth
            for proj in (block.attn.proj, block.mlp[2]):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * args.layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, docs=None):
        """idx: [B, S] token ids; docs: a packed batch's Documents (None: every row one document).
        Positions are a token's place in its row, whether or not the row is packed."""
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, docs)
        return self.head(self.ln_f(x))  # logits [B, S, vocab]


def loss_of(model, x, y, docs=None):
    """Next-token cross-entropy over every position of the rows, packed or not (a document's last
    token is trained to predict the next document's first, as in packed pretraining)."""
    logits = model(x, docs)
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())


# ---------------------------------------------------------------- training

def make_optimizer(model, args, device):
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")


def lr_at(step, args):
    """Linear warm-up over LR_WARMUP_STEPS, then cosine from lr down to lr/10 at the last step."""
    if step < LR_WARMUP_STEPS:
        return args.lr * (step + 1) / LR_WARMUP_STEPS
    progress = (step - LR_WARMUP_STEPS) / max(1, args.steps - 1 - LR_WARMUP_STEPS)
    return args.lr / 10 + (args.lr - args.lr / 10) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def autocast(device, amp_dtype):
    return torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else nullcontext()


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step(model, opt, scaler, x, y, step, args, device, amp_dtype, docs=None):
    for group in opt.param_groups:
        group["lr"] = lr_at(step, args)
    with autocast(device, amp_dtype):
        loss = loss_of(model, x, y, docs)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


@torch.no_grad()
def evaluate(model, data, args, device, amp_dtype):
    """Mean loss over --eval-batches validation batches, the same batches (and with --pack the same
    documents) every time."""
    gen = torch.Generator().manual_seed(EVAL_SEED)
    model.eval()
    with autocast(device, amp_dtype):
        losses = [loss_of(model, *next_batch(data, args, gen, device)) for _ in range(args.eval_batches)]
    model.train()
    return torch.stack(losses).mean().item()


class Training:
    """One model's training run of --steps steps, taken in turns of any number of steps (run())."""

    def __init__(self, model, train_data, val_data, args, device, amp_dtype):
        self.model, self.train_data, self.val_data = model, train_data, val_data
        self.args, self.device, self.amp_dtype = args, device, amp_dtype
        self.opt = make_optimizer(model, args, device)
        self.scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
        self.gen = torch.Generator().manual_seed(args.seed)
        self.tokens_per_step = args.batch * args.context
        self.warm = min(TIMING_WARMUP_STEPS, args.steps // 2)  # short smoke runs keep half their steps
        self.step, self.timed_seconds, self.turns = 0, 0.0, []
        self.loss_sum, self.window, self.window_seconds = torch.zeros((), device=device), 0, 0.0
        self.curve, self.n_docs = [], 0

    @property
    def done(self):
        return self.step == self.args.steps

    def run(self, n_steps):
        """Trains up to n_steps more steps. The GPU is synchronised and the clock read at the turn's
        ends, at the end of the warm-up and around evaluations; the timed stretches add to
        timed_seconds, and the turn's tokens/s goes to turns."""
        args = self.args
        last = min(args.steps, self.step + n_steps)
        turn_steps, turn_seconds = 0, 0.0
        steps, t0 = 0, self._clock()
        while self.step < last:
            x, y, docs = next_batch(self.train_data, args, self.gen, self.device)
            self.n_docs += len(docs.cu_seqlens) - 1 if docs is not None else args.batch
            self.loss_sum += train_step(self.model, self.opt, self.scaler, x, y, self.step, args, self.device,
                                        self.amp_dtype, docs)
            self.step += 1
            steps += 1
            evaluation = self.step % args.eval_every == 0 or self.done
            if evaluation or self.step == self.warm or self.step == last:  # the stretch ends here
                seconds = self._clock() - t0
                self.window += steps
                self.window_seconds += seconds
                if self.step > self.warm:  # stretches end at the warm-up's end: all timed or none
                    self.timed_seconds += seconds
                    turn_steps, turn_seconds = turn_steps + steps, turn_seconds + seconds
                if evaluation:
                    self._evaluate()
                steps, t0 = 0, self._clock()
        if turn_steps:
            self.turns.append(turn_steps * self.tokens_per_step / turn_seconds)

    def _clock(self):
        synchronize(self.device)
        return time.perf_counter()

    def _evaluate(self):
        point = {"step": self.step, "train_loss": self.loss_sum.item() / self.window,
                 "val_loss": evaluate(self.model, self.val_data, self.args, self.device, self.amp_dtype)}
        self.curve.append(point)
        rate = self.window * self.tokens_per_step / self.window_seconds
        print(f"{self.args.attn:8s} step {self.step:5d} | train {point['train_loss']:.4f} | "
              f"val {point['val_loss']:.4f} | {rate:10,.0f} tok/s", flush=True)
        self.loss_sum.zero_()
        self.window, self.window_seconds = 0, 0.0

    def result(self):
        """(curve, training tokens/s after the timing warm-up, the mean document length in tokens:
        --context without --pack)."""
        timed_steps = self.args.steps - self.warm
        train_tps = timed_steps * self.tokens_per_step / self.timed_seconds if timed_steps else None
        return self.curve, train_tps, self.args.steps * self.tokens_per_step / self.n_docs


@torch.no_grad()
def bench_inference(models, vocab_size, args, device, amp_dtype):
    """Forward passes of one [batch, context] input (with --pack, packed as the training batches)
    through each model: {attention: tokens/s}. Several models take turns of --bench-steps passes
    over INFER_ROUNDS rounds, the order reversed every round."""
    if not args.bench_steps:
        return {attn: None for attn in models}
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randint(vocab_size, (args.batch, args.context), generator=gen).to(device)
    docs = pack_documents(args.batch, args.context, gen, device) if args.pack else None
    seconds, order = dict.fromkeys(models, 0.0), list(models)
    rounds = INFER_ROUNDS if len(models) > 1 else 1
    with autocast(device, amp_dtype):
        for model in models.values():
            model.eval()
            for _ in range(INFER_WARMUP_PASSES):
                model(x, docs)
        for _ in range(rounds):
            for attn in order:
                synchronize(device)
                t0 = time.perf_counter()
                for _ in range(args.bench_steps):
                    models[attn](x, docs)
                synchronize(device)
                seconds[attn] += time.perf_counter() - t0
            order.reverse()
    return {attn: args.batch * args.context * args.bench_steps * rounds / s for attn, s in seconds.items()}


# ---------------------------------------------------------------- the kernels' status

def kernel_status(args, device, dtype):
    """Whether flash_tutorial's compiled extension is loaded, and why its kernels would not run
    this model's attention (forward and backward) here, None if they would."""
    try:
        from flash_tutorial import ops
    except ImportError as e:
        if args.attn == "tutorial":
            raise
        return {"kernels": None, "kernel_reason": f"flash_tutorial not importable: {e}"}
    probe = torch.empty(1, args.heads, 1, args.d_model // args.heads, device=device, dtype=dtype)
    return {"kernels": ops._C is not None, "kernel_reason": ops.kernel_unavailable_reason(probe, backward=True)}


def warn_if_reference(status, args, device):
    if args.attn != "tutorial" or device.type != "cuda" or status["kernel_reason"] is None:
        return
    bar = "!" * 100
    msg = (f"{bar}\n!! WARNING: --attn tutorial is NOT running the tutorial's kernels: {status['kernel_reason']}\n"
           f"!! Every attention call runs flash_tutorial's PyTorch reference; the numbers below measure that.\n{bar}")
    print(msg, flush=True)
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- main

def main(argv=None):
    t_begin = time.perf_counter()
    args = parse_args(argv)
    device = torch.device(args.device)
    amp_dtype = DTYPES[args.dtype] if device.type == "cuda" and args.dtype != "f32" else None
    compute_dtype = amp_dtype or torch.float32
    if args.pack and "sdpa" in args.attns and device.type == "cuda" and amp_dtype is not None:
        causal_varlen_attn()  # fails here, before training, where this PyTorch has no usable varlen_attn

    train_data, val_data, vocab = load_text()
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    runs = {}  # attention -> (its arguments, kernel status, Training)
    for attn in args.attns:
        run_args = argparse.Namespace(**{**vars(args), "attn": attn})
        status = kernel_status(run_args, device, compute_dtype)
        warn_if_reference(status, run_args, device)
        torch.manual_seed(args.seed)  # the same weights for every attention
        model = GPT(len(vocab), run_args).to(device)
        runs[attn] = run_args, status, Training(model, train_data, val_data, run_args, device, amp_dtype)
        n_params = sum(p.numel() for p in model.parameters())
        print(f"{attn}{' packed' if args.pack else ''} | seed {args.seed} | {n_params / 1e6:.2f}M params | "
              f"vocab {len(vocab)} | {gpu} | compute {str(compute_dtype).removeprefix('torch.')} | "
              f"kernels {status['kernels']} ({status['kernel_reason'] or 'they run'})", flush=True)
    if len(runs) > 1:
        print(f"{' and '.join(runs)} train in turns of {args.turn_steps} steps", flush=True)

    trainings = [training for _, _, training in runs.values()]
    order = list(trainings)
    while not all(t.done for t in trainings):
        for training in order:
            training.run(args.turn_steps if len(trainings) > 1 else args.steps)
        order.reverse()  # no attention always goes first
    infer_tps = bench_inference({attn: t.model for attn, (_, _, t) in runs.items()}, len(vocab), args, device,
                                amp_dtype)

    for attn, (run_args, status, training) in runs.items():
        curve, train_tps, mean_doc_len = training.result()
        out = args.out.format(attn=attn)
        result = {
            "config": {**vars(run_args), "params": sum(p.numel() for p in training.model.parameters()), "vocab": len(vocab), "gpu": gpu,
                       "compute_dtype": str(compute_dtype).removeprefix("torch."), "torch": torch.__version__,
                       "cuda": torch.version.cuda, "grad_clip": GRAD_CLIP, "lr_warmup_steps": LR_WARMUP_STEPS,
                       "timing_warmup_steps": training.warm},
            "attn": attn, "seed": args.seed, "pack": args.pack, "mean_doc_len": mean_doc_len, **status,
            "in_turns_with": [a for a in runs if a != attn],
            "curve": curve, "final_val_loss": curve[-1]["val_loss"],
            "train_tokens_per_s": train_tps, "turns_tokens_per_s": training.turns,
            "infer_tokens_per_s": infer_tps[attn],
            "wall_s": time.perf_counter() - t_begin,
        }
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
        packed = f"packed, mean document {mean_doc_len:.1f} tokens | " if args.pack else ""
        print(f"{attn}: final val loss {result['final_val_loss']:.4f} | {packed}train {train_tps or float('nan'):,.0f} "
              f"tok/s | inference {infer_tps[attn] or float('nan'):,.0f} tok/s | {result['wall_s']:.1f} s -> {out}",
              flush=True)


if __name__ == "__main__":
    main()
