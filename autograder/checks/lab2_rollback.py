"""How Lab 2's rollback check watches a decoder (autograder.checks.lab2.check_rollback): the caches it hands
`on_step` against a fresh prefill, and the forwards it makes, counted on the course's own models.

Judged inside the notebook (its CellSpec says in_grader=False), where the models are the objects the
student's code calls. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch

ATOL = 1e-4  # cache entries: incremental vs fresh prefill (float32 rounding is ~1e-6)


def cache_checker(target, draft, log: list) -> Callable:
    """on_step callback: both caches must equal a fresh prefill of all emitted tokens but the last."""

    def on_step(tc, dc, seq) -> None:
        seq = [int(t) for t in seq]
        want_len = len(seq) - 1
        for name, model, cache in (("target", target, tc), ("draft", draft, dc)):
            assert cache.length == want_len, (f"after step {len(log) + 1} the {name} cache holds {cache.length} "
                                              f"positions; it should hold {want_len} (every token but the last emitted)")
            fresh = model.new_cache(batch=1, max_len=max(want_len, 1))
            if want_len:
                # the class's forward: a counted model (counted) does not count the check's own prefill
                type(model).forward(model, torch.tensor([seq[:want_len]], device=model.device),
                                    torch.arange(want_len, device=model.device), fresh)
            for layer in range(cache.n_layer):
                for kind, a, b in (("K", cache.k[layer], fresh.k[layer]), ("V", cache.v[layer], fresh.v[layer])):
                    err = float((a[:, :, :want_len].float() - b[:, :, :want_len].float()).abs().max()) if want_len else 0.0
                    assert err < ATOL, (f"after step {len(log) + 1} the {name} cache's {kind} of layer {layer} "
                                        f"differs from a fresh prefill of the emitted tokens by {err:.3g}")
        log.append(len(seq))

    return on_step


@contextmanager
def counted(model) -> Iterator[list[int]]:
    """While the block runs, every forward of `model` (called as model(tokens, ...) or model.forward(...))
    appends the number of tokens it was fed to the list it yields. Judged inside the notebook
    (check_rollback), where the grader's model objects are the ones the student's code calls."""
    fed: list[int] = []
    real = type(model).forward

    def forward(tokens, *args, **kwargs):
        fed.append(int(tokens.shape[-1]))
        return real(model, tokens, *args, **kwargs)

    model.__dict__["forward"] = forward  # found before the class's method, by model(...) too
    try:
        yield fed
    finally:
        model.__dict__.pop("forward", None)


def steps_emit_what_they_report(log: list[int], acc, start: int, eos=None) -> None:
    """on_step saw len(seq) = log[s] after step s: each step emitted accepted[s] + 1 tokens (fewer only at eos)."""
    grew = [b - a for a, b in zip([start] + log[:-1], log)]
    assert len(grew) == len(acc), (f"on_step was called {len(grew)} times but `accepted` has {len(acc)} entries: "
                                   f"one of each per step")
    for s, (g, a) in enumerate(zip(grew, acc)):
        last_at_eos = eos is not None and s == len(acc) - 1 and g <= int(a) + 1
        assert g == int(a) + 1 or last_at_eos, (f"step {s + 1} reported accepted = {int(a)} but emitted {g} new "
                                                f"token(s); a step emits its accepted drafts plus one token")


def speculated(target_fed: list[int], draft_fed: list[int], acc, prompt_len: int, k: int, where: str) -> None:
    steps = len(acc)
    accepting = sum(1 for a in acc if int(a) > 0)
    assert len(draft_fed) >= accepting, (f"{where}: {accepting} steps accepted a draft but the draft model ran "
                                         f"{len(draft_fed)} forward(s): accepted drafts must come from the draft model")
    assert len(target_fed) <= steps + 1, (f"{where}: the target ran {len(target_fed)} forwards in {steps} steps; one "
                                          f"forward verifies all of a step's drafts (at most {steps + 1} with the prompt's)")
    most = prompt_len + steps * (k + 1)
    assert sum(target_fed) <= most, (f"{where}: the target was fed {sum(target_fed)} tokens in {steps} steps, more "
                                     f"than the {most} a decoder that rolls its cache back feeds (was a cache rebuilt?)")
