"""A toy draft/target pair over a 4-token vocabulary, with the exact law of generated sequences.

Notation: see the `speclab` package docstring.

The toy models ARE speclab.model.GPT instances (same forward, KV cache and
rollback), only tiny and with a vocabulary of 4, so a decoder written for the
shipped pair runs on them unchanged. With 4 tokens, every continuation of a few
tokens can be enumerated and its exact probability under p computed from the
cache-free oracle: that is what sequence-level exactness tests compare against.
"""
from __future__ import annotations

import itertools

import numpy as np
import torch

from speclab.model import GPT, GPTConfig
from speclab.sampling import process_logits

__all__ = ["TOY_VOCAB", "toy_model", "toy_pair", "sequence_law"]

TOY_VOCAB = 4
TOY_CONFIG = GPTConfig(n_layer=1, n_head=2, d_model=16, vocab_size=TOY_VOCAB, max_len=32)


@torch.no_grad()
def toy_model(seed: int, logit_scale: float = 1.2) -> GPT:
    """A random tiny GPT whose next-token distributions are far from uniform (eval mode, float32, CPU)."""
    torch.manual_seed(seed)
    model = GPT(TOY_CONFIG).eval()
    # the default 0.02-std init gives nearly uniform softmaxes; widen the tied embedding so that
    # p and q differ visibly (alpha well below 1) and depend on the context through attention
    model.embed.weight.normal_(0.0, logit_scale / TOY_CONFIG.d_model**0.5)
    for block in model.blocks:
        for param in block.parameters():
            if param.dim() == 2:
                param.normal_(0.0, 1.0 / param.shape[1] ** 0.5)
    return model


def toy_pair(seed: int = 0) -> tuple[GPT, GPT]:
    """(target, draft): two independently initialised toy models."""
    return toy_model(2 * seed + 1), toy_model(2 * seed + 2)


@torch.no_grad()
def sequence_law(
    target: GPT,
    prompt: list[int],
    n_new: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Exact probability of every continuation of n_new tokens under p (no end token).

    Returns (law, continuations): law[i] = P_p(continuations[i] | prompt), summing to 1,
    computed with the cache-free reference forward and process_logits (the same transform
    the decoder must apply).
    """
    if n_new < 1 or not prompt:
        raise ValueError(f"need a non-empty prompt and n_new >= 1, got {len(prompt)} and {n_new}")
    V = target.cfg.vocab_size
    conts = list(itertools.product(range(V), repeat=n_new))
    law = np.empty(len(conts))
    for i, cont in enumerate(conts):
        seq = torch.tensor([list(prompt) + list(cont)], dtype=torch.long)
        probs = process_logits(target.reference_forward(seq)[0], temperature, top_k, top_p).double()  # [T, V]
        start = len(prompt) - 1  # row t predicts token t + 1
        law[i] = float(np.prod([probs[start + j, tok].item() for j, tok in enumerate(cont)]))
    if abs(law.sum() - 1) > 1e-6:
        raise RuntimeError(f"sequence law sums to {law.sum()}, not 1")
    return law / law.sum(), conts
