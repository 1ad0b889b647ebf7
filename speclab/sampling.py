"""Turning logits into the distribution that is sampled from, and plain autoregressive generation.

Notation: see the `speclab` package docstring.

`process_logits` is THE distribution: speculative decoding must draw a draft token
from q = process_logits(draft_logits, ...) and use that very same q (and
p = process_logits(target_logits, ...) with the same settings) in the acceptance
test min(1, p(x)/q(x)). Sampling from one transform and testing with another
(e.g. sampling with top-k but accepting with the raw softmax) breaks exactness.

Order of the transforms (the usual one): temperature, then top-k, then top-p.
"""

from __future__ import annotations

import math

import torch

__all__ = ["process_logits", "sample", "generate"]


def _check_settings(temperature: float, top_k: int | None, top_p: float | None, vocab: int) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an int >= 1, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    if vocab < 1:
        raise ValueError("logits must have a non-empty last dimension")


def process_logits(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """Probabilities [..., V] (float32, rows sum to 1) from logits [..., V].

    temperature == 0 gives a one-hot at the argmax (the first one on ties), whatever
    top_k and top_p are. top_k keeps the k largest logits (ties with the k-th are kept
    too). top_p keeps the smallest set of most likely tokens whose probability reaches
    top_p (always at least one token). Removed tokens get probability exactly 0.
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError("logits must be a floating-point torch.Tensor")
    if logits.dim() < 1:
        raise ValueError("logits must have at least one dimension (the vocabulary)")
    V = logits.shape[-1]
    _check_settings(temperature, top_k, top_p, V)
    logits = logits.float()
    if torch.isnan(logits).any():
        raise ValueError("logits contain NaN")
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), V).float()  # [..., V]
    z = logits / temperature  # [..., V]
    if top_k is not None and top_k < V:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]  # [..., 1]
        z = z.masked_fill(z < kth, float("-inf"))
    probs = torch.softmax(z, dim=-1)  # [..., V]
    if top_p is not None and top_p < 1:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)  # [..., V]
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # probability of strictly more likely tokens
        drop_sorted = mass_before >= top_p  # the first token has mass_before 0 < top_p, so it is kept
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row: probs [..., V] -> LongTensor [...]."""
    if probs.dim() < 1:
        raise ValueError("probs must have at least one dimension (the vocabulary)")
    flat = probs.reshape(-1, probs.shape[-1])  # [N, V]
    out = torch.multinomial(flat, 1, generator=generator)  # [N, 1]
    return out.view(probs.shape[:-1])


@torch.no_grad()
def generate(
    model,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Plain autoregressive decoding with the KV cache: the baseline speculative decoding must match.

    prompt: LongTensor [B, T0] on the model's device. Returns [B, T0 + max_new_tokens].
    temperature=0 is greedy decoding.
    """
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must have shape [B, T0] with T0 >= 1, got {tuple(prompt.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    B, T0 = prompt.shape
    total = T0 + max_new_tokens
    cache = model.new_cache(batch=B, max_len=total)
    out = torch.empty(B, total, dtype=torch.long, device=prompt.device)
    out[:, :T0] = prompt
    if max_new_tokens == 0:
        return out
    logits = model(prompt, torch.arange(T0, device=prompt.device), cache)[:, -1]  # [B, V]
    for t in range(T0, total):
        nxt = sample(process_logits(logits, temperature, top_k, top_p), generator)  # [B]
        out[:, t] = nxt
        if t + 1 < total:
            logits = model(nxt[:, None], torch.tensor([t], device=prompt.device), cache)[:, -1]
    return out
