"""Greedy decoding on CUDA graphs: the autoregressive baseline and speculative decoding.

Notation: see the `speclab` package docstring (p = target, q = draft, k = draft length).

Built on the static path of `speclab.model` (`forward_static`, `StaticKVCache`, `GraphedStep`):
every decode step of a fixed shape is captured once as a CUDA graph and replayed, one launch
for a whole forward. The decoders keep every length on the host, so the caches are rolled back
with plain device writes (`rollback_unchecked`) and a step reads the device once, to learn how
many drafts the target accepted. Off CUDA the same code runs the static path eagerly (nothing
is captured), which is how the CPU tests check it.

    pair = GraphedPair(target, draft, capacity=len(prompt) + n + k + 1, ks=[k])
    tokens = graphed_greedy_autoregressive(pair, prompt, n)
    same, accepted = graphed_greedy_speculative(pair, prompt, n, k)   # same == tokens

The speculative decoder accepts a draft iff it is the target's argmax, so its tokens equal
greedy autoregressive decoding (in float32; bf16 may flip near-ties between a one-token and
a (k+1)-token forward). The GPU report (benchmarks/gpu/report.py) times both.
"""

from __future__ import annotations

from typing import Iterable

import torch

from speclab.model import GPT, GraphedStep

__all__ = ["GraphedPair", "static_capacity", "graphed_greedy_autoregressive", "graphed_greedy_speculative"]


def static_capacity(needed: int, max_len: int) -> int:
    """A static cache's capacity >= needed, rounded up to a multiple of 16 (the alignment the fused
    attention kernels want for a mask's last dimension), at most max_len.

    The static path attends over every slot of its cache, so the capacity is kept just above
    what the decode needs."""
    return min(max_len, -(-needed // 16) * 16)


class GraphedPair:
    """A (target, draft) pair with a static cache each and their graphed steps:

    t1, d1      one-token steps of the target and the draft
    verify[k]   the target's (k+1)-token step, one for every k in ks
    tc, dc      the target's and the draft's StaticKVCache (capacity from static_capacity)
    """

    def __init__(self, target: GPT, draft: GPT, capacity: int, ks: Iterable[int]) -> None:
        self.target, self.draft = target, draft
        capacity = static_capacity(capacity, min(target.cfg.max_len, draft.cfg.max_len))
        self.tc = target.new_static_cache(max_len=capacity)
        self.dc = draft.new_static_cache(max_len=capacity)
        self.t1 = GraphedStep(target, self.tc, T=1)
        self.d1 = GraphedStep(draft, self.dc, T=1)
        self.verify = {k: GraphedStep(target, self.tc, T=k + 1) for k in ks}


@torch.inference_mode()
def graphed_greedy_autoregressive(pair: GraphedPair, prompt: torch.Tensor, n: int) -> list[int]:
    """n tokens of greedy decoding with the target alone, one graphed step per token and no host
    read until the end. prompt: [T0] token ids on the models' device."""
    dev = prompt.device
    pair.tc.reset()
    logits = pair.target.forward_static(prompt[None], pair.tc)[0, -1]  # [V]
    out = torch.empty(n, dtype=torch.long, device=dev)
    tok = logits.argmax().view(1, 1)
    for i in range(n):
        out[i] = tok[0, 0]
        if i + 1 < n:
            tok = pair.t1(tok)[0, -1].argmax().view(1, 1)
    return out.tolist()


@torch.inference_mode()
def graphed_greedy_speculative(pair: GraphedPair, prompt: torch.Tensor, n: int, k: int) -> tuple[list[int], list[int]]:
    """(n tokens, accepted drafts per step) of greedy speculative decoding on graphed steps.

    k draft steps and one (k+1)-token verify are launched without reading anything back; one
    host read per step decides how many drafts were accepted. The rule is the Lab 2 decoder's at
    temperature 0: accept a draft iff it is the target's argmax; emit the target's argmax at the
    first mismatch, or the bonus token after k matches. Steps always draft k tokens; the output
    is cut at n tokens. Both caches hold len(seq) - 1 positions at the top of the loop; the host
    knows every length, so rollbacks are unchecked device writes (no sync).
    """
    if k not in pair.verify:
        raise ValueError(f"no verify graph for k={k}; captured: {sorted(pair.verify)}")
    pair.tc.reset()
    pair.dc.reset()
    T0 = prompt.numel()
    if T0 > 1:
        pair.target.forward_static(prompt[None, :-1], pair.tc)
        pair.draft.forward_static(prompt[None, :-1], pair.dc)
    length = T0 - 1  # positions held by both caches
    last = prompt[-1:].view(1, 1)
    new: list[int] = []
    accepted: list[int] = []
    while len(new) < n:
        x, drafts = last, []
        for _ in range(k):
            x = pair.d1(x)[0, -1].argmax().view(1, 1)
            drafts.append(x)
        block = torch.cat([last] + drafts, dim=1)  # [1, k+1]
        best = pair.verify[k](block)[0].argmax(dim=-1)  # [k+1] the target's argmax after each prefix
        host = torch.cat([best, block[0, 1:]]).tolist()  # the one host read of the step
        best_h, drafted = host[: k + 1], host[k + 1 :]
        a = next((i for i in range(k) if best_h[i] != drafted[i]), k)  # accepted drafts
        emitted = best_h[: a + 1]  # a accepted drafts (equal to the target's argmax) + the target's token after them
        accepted.append(a)
        new.extend(emitted)
        keep = length + len(emitted)  # new length of both caches: len(seq) - 1
        pair.tc.rollback_unchecked(keep)
        if a == k:  # the draft never saw its own last draft token: feed it (one graphed draft step)
            pair.dc.rollback_unchecked(length + k)
            pair.d1(drafts[-1])
        else:
            pair.dc.rollback_unchecked(keep)
        length = keep
        last = best[a : a + 1].view(1, 1)  # emitted[-1], still on the device
    return new[:n], accepted
