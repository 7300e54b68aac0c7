"""The op as a Hugging Face `transformers` attention implementation.

    import flash_tutorial.hf
    flash_tutorial.hf.register()                       # once: names it "tutorial"
    model = LlamaForCausalLM(config)
    model.set_attn_implementation("tutorial")          # or from_pretrained(..., attn_implementation=...)

transformers (5.x) calls an attention implementation with the layer's module and q, k, v as
[B, H, S, D] and takes back [B, S, H, D]; this one hands their [B, S, H, D] views to
flash_tutorial.attention (layout "bshd"): the projections lie that way in memory, so on Hopper 09
and 11 read them in place through their strides, and O comes back as [B, S, H, D] without a copy. The
mask function registered with it returns None unless a padding mask hides some token: causality
comes from the layer (is_causal) and the window from its `sliding_window`, so no [Sq, Sk] mask
is built. A real padding mask goes to transformers' SDPA mask function, and the attention
function then refuses the explicit mask it gets. Sliding-window layers
(Mistral, Gemma 2) come with `sliding_window`, which becomes the op's window as FlashAttention's
integration does it: (sliding_window - 1, sliding_window - 1), under causal masking only the left
side matters. What the op cannot run is refused with a message: an explicit mask (padding; pack the
sequences with attention_varlen instead) and dropout. A logit softcap (Gemma 2's) is passed on as the op's
softcap.
"""
from typing import Optional

import torch

from . import attention

NAME = "tutorial"  # a name with "flash" in it would send transformers looking for a FlashAttention kernel


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None, dropout: float = 0.0,
                      sliding_window: Optional[int] = None, softcap: Optional[float] = None,
                      is_causal: Optional[bool] = None, **kwargs):
    """transformers' attention-function signature: (attn_output [B, S, H, D], attn_weights None)."""
    if attention_mask is not None:
        raise ValueError("flash_tutorial.hf: the op takes no explicit attention mask (padding); pack the batch with "
                         "flash_tutorial.attention_varlen, or use attn_implementation='sdpa' for padded batches")
    if dropout:
        raise ValueError(f"flash_tutorial.hf: the op has no attention dropout (got {dropout}); set it to 0")
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    window = None if sliding_window is None else (sliding_window - 1, sliding_window - 1)
    # [B, S, H, D] views of what transformers hands over: its projections lie that way in memory, and
    # the op reads such views in place (09 and 11 through their strides) and returns O as
    # [B, S, H, D], the layout transformers wants back; no copy either way.
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), causal=bool(causal),
                    scale=scaling, layout="bshd", window=window, softcap=float(softcap or 0.0))
    return out, None


def register(name: str = NAME) -> str:
    """Registers the op under `name` with transformers' attention and mask interfaces; returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    sdpa_mask = ALL_MASK_ATTENTION_FUNCTIONS["sdpa"]

    def mask(*args, attention_mask: Optional[torch.Tensor] = None, **kwargs):
        if attention_mask is None or bool(attention_mask.all()):  # no padding: the op masks by itself
            return None
        return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)

    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, mask)
    return name
