"""A transformers Llama and a Mistral (sliding window) running on the op through transformers'
attention registry (flash_tutorial.hf), against the same models on SDPA (pytest). Small configs,
random weights, nothing downloaded; skipped where transformers is not installed."""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

import flash_tutorial.hf as hf  # noqa: E402

SMALL = dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128)


def models(kind):
    """(the model on SDPA, a copy of it on the op): Llama-style GQA, or Mistral's sliding window of 8."""
    torch.manual_seed(0)
    if kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL))
    else:
        model = transformers.MistralForCausalLM(transformers.MistralConfig(**SMALL, sliding_window=8))
    model.set_attn_implementation("sdpa")
    ours = copy.deepcopy(model)
    ours.set_attn_implementation(hf.register())
    return model, ours


@pytest.mark.parametrize("kind", ["llama", "mistral"])
@pytest.mark.parametrize("with_mask", [False, True])  # an all-ones padding mask, as generate() passes
def test_training_step_matches_sdpa(kind, with_mask):
    sdpa, ours = models(kind)
    ids = torch.randint(0, SMALL["vocab_size"], (2, 33), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids) if with_mask else None
    a, b = sdpa(ids, labels=ids, attention_mask=mask), ours(ids, labels=ids, attention_mask=mask)
    # float32 on both sides (on the CPU the op runs its reference): 33 keys a row, two layers.
    torch.testing.assert_close(b.logits, a.logits, atol=2e-5, rtol=1e-5)
    a.loss.backward()
    b.loss.backward()
    for (name, p), q in zip(sdpa.named_parameters(), ours.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=2e-6, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def test_window_reaches_the_op():
    # Mistral's window of 8 over 33 tokens: the op, given the window, matches SDPA's explicit mask;
    # without it, the logits differ (so the comparison above sees the window).
    sdpa, ours = models("mistral")
    ids = torch.randint(0, SMALL["vocab_size"], (1, 33), generator=torch.Generator().manual_seed(2))
    full = copy.deepcopy(ours)
    full.config.sliding_window = None
    assert not torch.allclose(full(ids).logits, sdpa(ids).logits, atol=1e-3)
    torch.testing.assert_close(ours(ids).logits, sdpa(ids).logits, atol=2e-5, rtol=1e-5)


def test_padding_mask_is_refused():
    _, ours = models("llama")
    ids = torch.randint(0, SMALL["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(3))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    with pytest.raises(ValueError, match="attention_varlen"):
        ours(ids, attention_mask=mask)


def test_gemma2_softcap_and_window_match_eager():
    # Gemma 2: a logit softcap on every layer, a sliding window of 8 on alternate layers. transformers'
    # SDPA path has no softcap, so the yardstick is its eager attention (the softcap written out).
    # The cap is 0.5 (Gemma 2's is 50): the random weights' scores are small, and a cap they never
    # reach would leave the comparison blind to it (the last assertion).
    torch.manual_seed(0)
    config = transformers.Gemma2Config(**SMALL, head_dim=16, sliding_window=8, attn_logit_softcapping=0.5,
                                       query_pre_attn_scalar=16)
    eager = transformers.Gemma2ForCausalLM(config)
    eager.set_attn_implementation("eager")
    ours = copy.deepcopy(eager)
    ours.set_attn_implementation(hf.register())
    ids = torch.randint(0, SMALL["vocab_size"], (2, 33), generator=torch.Generator().manual_seed(4))
    a, b = eager(ids, labels=ids), ours(ids, labels=ids)
    torch.testing.assert_close(b.logits, a.logits, atol=2e-5, rtol=1e-5)
    a.loss.backward()
    b.loss.backward()
    for (name, p), q in zip(eager.named_parameters(), ours.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=2e-6, rtol=1e-4, msg=lambda m: f"{name}: {m}")
    # Without the cap the logits differ: the comparison above sees the softcap.
    uncapped = copy.deepcopy(ours)
    for layer in uncapped.model.layers:
        layer.self_attn.attn_logit_softcapping = None
    assert not torch.allclose(uncapped(ids).logits, a.logits, atol=1e-4)
