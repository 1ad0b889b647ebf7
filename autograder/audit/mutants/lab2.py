"""Catalog of known-wrong Lab 2 decoders; each must lose points in its part.

Each mutant is the reference `speculative_decode` of solutions/lab2/lab2.md with one
typical mistake (its docstring's first line says which), written out as the function a
student would hand in. It uses the notebook's names (torch, process_logits, prefill)
and only runs once injected: see `autograder.audit.mutants`. Notation: see the `speclab`
package docstring.
"""
# ruff: noqa: F821 - the names are the notebook's
from __future__ import annotations

import torch

from autograder.audit.mutants import Mutant, mutant

MUTANTS: list[Mutant] = []


@mutant(2, "speculative_decode", MUTANTS)
@torch.no_grad()
def no_rollback(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                generator=None, on_step=None):
    """Never rolls the caches back after a rejection."""
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]
        x = torch.tensor([toks], device=dev)
        pos = torch.arange(cache.length, cache.length + len(toks), device=dev)
        return model(x, pos, cache)[0]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq) - 1
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted


@mutant(2, "speculative_decode", MUTANTS)
@torch.no_grad()
def rollback_off_by_one(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                        temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                        generator=None, on_step=None):
    """Rolls both caches back to one position more than the emitted length allows."""
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]
        x = torch.tensor([toks], device=dev)
        pos = torch.arange(cache.length, cache.length + len(toks), device=dev)
        return model(x, pos, cache)[0]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq)
        tc.rollback(min(keep, tc.length))
        dc.rollback(min(keep, dc.length))
        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
            forward(draft, dc, seq[dc.length:keep])
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted


@mutant(2, "speculative_decode", MUTANTS)
@torch.no_grad()
def draft_not_caught_up(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                        temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                        generator=None, on_step=None):
    """After a full acceptance the draft cache is never fed the last draft token."""
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]
        x = torch.tensor([toks], device=dev)
        pos = torch.arange(cache.length, cache.length + len(toks), device=dev)
        return model(x, pos, cache)[0]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq) - 1
        tc.rollback(min(keep, tc.length))
        dc.rollback(min(keep, dc.length))
        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
            pass
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted


@mutant(2, "speculative_decode", MUTANTS)
@torch.no_grad()
def target_logits_shifted(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                          temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                          generator=None, on_step=None):
    """Tests draft i against the target row of position i + 1 (logits shifted by one)."""
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]
        x = torch.tensor([toks], device=dev)
        pos = torch.arange(cache.length, cache.length + len(toks), device=dev)
        return model(x, pos, cache)[0]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        target_logits = torch.cat([target_logits[1:], target_logits[-1:]])
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq) - 1
        tc.rollback(min(keep, tc.length))
        dc.rollback(min(keep, dc.length))
        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
            forward(draft, dc, seq[dc.length:keep])
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted


@mutant(2, "speculative_decode", MUTANTS)
@torch.no_grad()
def transform_one_side(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                       temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                       generator=None, on_step=None):
    """The target's p gets the temperature only; top-k/top-p shape the draft's q alone."""
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    def forward(model, cache, toks):  # toks: list of ints -> logits [T, V]
        x = torch.tensor([toks], device=dev)
        pos = torch.arange(cache.length, cache.length + len(toks), device=dev)
        return model(x, pos, cache)[0]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq) - 1
        tc.rollback(min(keep, tc.length))
        dc.rollback(min(keep, dc.length))
        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
            forward(draft, dc, seq[dc.length:keep])
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted


@mutant(2, "speculative_decode", MUTANTS)
@torch.no_grad()
def recompute_without_cache(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                            temperature: float = 0.0, top_k=None, top_p=None, eos=None,
                            generator=None, on_step=None):
    """Correct but slow: every forward recomputes the whole prefix without the cache."""
    if k < 1:
        raise ValueError(f"draft length k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    dev = prompt.device
    seq = [int(t) for t in prompt.tolist()]
    T0 = len(seq)
    new: list = []
    accepted: list = []
    if max_new_tokens == 0:
        return new, accepted
    capacity = T0 + max_new_tokens
    tc = target.new_cache(batch=1, max_len=capacity)
    dc = draft.new_cache(batch=1, max_len=capacity)
    # both caches hold the prompt except its last token: the loop feeds the last token of seq
    if T0 > 1:
        prefill(target, prompt[:-1], tc)
        prefill(draft, prompt[:-1], dc)

    history = {}

    def forward(model, cache, toks):  # recomputes the prefix from scratch every time
        past = history.get(id(cache), seq[: cache.length])[: cache.length] + list(toks)
        history[id(cache)] = past
        model(torch.tensor([toks], device=dev), torch.arange(cache.length, cache.length + len(toks), device=dev), cache)
        return model(torch.tensor([past], device=dev), None, None)[0, -len(toks):]

    while len(new) < max_new_tokens:
        n = len(seq)  # both caches hold n - 1 positions
        k_step = min(k, max_new_tokens - len(new) - 1)  # never emit past max_new_tokens
        # 1. draft k_step tokens, one cached draft forward each, keeping q of each
        drafts, qs = [], []
        last = seq[-1]
        for _ in range(k_step):
            logits = forward(draft, dc, [last])[-1]  # [V]
            if temperature == 0:  # q is one-hot at the argmax: sampling it IS the argmax (no RNG, no sync)
                last = int(logits.argmax())
            else:
                q = process_logits(logits, temperature, top_k, top_p)  # [V]
                last = int(torch.multinomial(q, 1, generator=generator))
                qs.append(q)
            drafts.append(last)
        # 2. verify: ONE target forward over seq[-1] and the k_step drafts -> k_step + 1 rows of p
        target_logits = forward(target, tc, [seq[-1]] + drafts)  # [k_step+1, V]
        # 3. accept/reject left to right (the Lab 1 rule)
        emitted = []
        if temperature == 0:
            # p and q are one-hot: accept x iff it is the target's argmax; the residual and the
            # bonus are both one-hot at the target's argmax. Same rule, one host transfer.
            best = target_logits.argmax(dim=-1).tolist()  # [k_step+1]
            for i, x in enumerate(drafts):
                emitted.append(best[i])
                if best[i] != x:
                    break
            else:
                emitted.append(best[k_step])
            drafts = []  # nothing left for the sampling loop below
        else:
            ps = process_logits(target_logits, temperature, top_k, top_p)  # [k_step+1, V]
        for i, x in enumerate(drafts):
            u = float(torch.rand((), generator=generator, device=dev))
            if u * float(qs[i][x]) < float(ps[i, x]):  # u < p(x)/q(x)
                emitted.append(x)
                continue
            residual = torch.clamp(ps[i] - qs[i], min=0)  # [V]
            emitted.append(int(torch.multinomial(residual / residual.sum(), 1, generator=generator)))
            break
        else:
            if temperature != 0:
                emitted.append(int(torch.multinomial(ps[k_step], 1, generator=generator)))  # bonus token from p
        accepted.append(len(emitted) - 1)
        if eos is not None and eos in emitted:
            emitted = emitted[: emitted.index(eos) + 1]
        seq.extend(emitted)
        new.extend(emitted)
        # 4. roll both caches back to len(seq) - 1 positions; the draft catches up if it is short
        keep = len(seq) - 1
        tc.rollback(min(keep, tc.length))
        dc.rollback(min(keep, dc.length))
        if dc.length < keep:  # all drafts accepted: the last draft token was never fed to the draft
            forward(draft, dc, seq[dc.length:keep])
        if on_step is not None:
            on_step(tc, dc, list(seq))
        if eos is not None and new[-1] == eos:
            break
    return new, accepted
