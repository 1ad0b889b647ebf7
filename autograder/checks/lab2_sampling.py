"""The statistical design of Lab 2's sampling cell: the toy pair's settings, the knobs a grading run draws, the
exact law of the first two emitted tokens (enumerated), and the cases (`stats.ExactnessCase`) that draw them
from a student's decoder. The check that uses them is `lab2.check_sampling_exactness`; `python -m
autograder.audit.power lab2` computes each case's false-failure bound, its eps (the worst over each knob range)
and its power against the catalog. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import numpy as np
import torch

from . import hidden
from .calls import call_each
from .models import rebuildable
from .stats import ExactnessCase

TOY_PROMPT = [0, 1]
TOY_NEW = 3  # tokens asked for; the outcome tested is the pair of the first two (a k = 2 block spans both)
SAMPLING_SETTINGS = {  # name -> (k, temperature, top_k, top_p, n)
    # eps <= 0.03 on the joint law of the first two tokens: n = stats.n_for_eps at this alpha, with
    # the early looks of stats.early_passes (a correct decoder usually passes at 0.3 n to 0.55 n)
    "T=1, k=2": (2, 1.0, None, None, 33300),
    # the knobs acting on both p and q: sized for grading time, each states its own eps
    "T=0.8, top-k=2, k=3": (3, 0.8, 2, None, 3000),
    "T=1.2, top-p=0.8, k=1": (1, 1.2, None, 0.8, 3000),
}
EPS_TARGET = 0.03  # for TARGETED
TARGETED = "T=1, k=2"
# Under a grading run's key (autograder/checks/hidden.py) each case's knobs are drawn per student from these
# ranges (the fixed settings above are used without a key): (k range, temperature range, top-k choices, top-p
# range); None: the knob stays as in SAMPLING_SETTINGS. The power report states the worst eps over each range
# (`worst_case_eps`, on a grid), and a decoder exact only at the fixed settings fails.
KNOB_RANGES = {
    "T=1, k=2": ((1, 4), None, None, None),
    "T=0.8, top-k=2, k=3": ((1, 4), (0.4, 0.6), (2, 3), None),
    "T=1.2, top-p=0.8, k=1": ((1, 4), (1.2, 1.6), None, (0.6, 0.9)),
}
KNOB_GRID = 4  # grid points per continuous knob for worst_case_eps


def sampling_settings() -> dict[str, tuple]:
    """name in SAMPLING_SETTINGS -> (shown name, k, temperature, top_k, top_p, n): the fixed settings without a
    key; under a key, each case's knobs drawn from KNOB_RANGES (temperature and top-p rounded to 2 decimals),
    which its shown name says."""
    if not hidden.active():
        return {name: (name, *v) for name, v in SAMPLING_SETTINGS.items()}
    out = {}
    for name, (k, temp, top_k, top_p, n) in SAMPLING_SETTINGS.items():
        ks, temps, top_ks, top_ps = KNOB_RANGES[name]
        rng = np.random.default_rng(hidden.seed(f"lab2 knobs {name}", 0))
        k = int(rng.integers(ks[0], ks[1] + 1))
        temp = temp if temps is None else round(float(rng.uniform(*temps)), 2)
        top_k = top_k if top_ks is None else int(rng.integers(top_ks[0], top_ks[1] + 1))
        top_p = top_p if top_ps is None else round(float(rng.uniform(*top_ps)), 2)
        knobs = [f"T={temp:g}"] + ([f"top-k={top_k}"] if top_k else []) + ([f"top-p={top_p:g}"] if top_p else [])
        out[name] = (", ".join(knobs + [f"k={k}"]) + " (drawn for this run)", k, temp, top_k, top_p, n)
    return out


def _grid(knob: tuple | None, fixed, integer: bool = False) -> list:
    if knob is None:
        return [fixed]
    if integer:
        return list(range(knob[0], knob[1] + 1))
    return [round(float(v), 2) for v in np.linspace(knob[0], knob[1], KNOB_GRID)]


@rebuildable
def toy_pair(seed: int):
    """speclab.toy's (target, draft) toy pair, which the grader's verdict hands the student's decoder as a
    reference the student's side rebuilds (autograder/checks/models.py)."""
    from speclab import toy

    return toy.toy_pair(seed)


def worst_case_eps(case_name: str, n: int, alpha: float) -> float | None:
    """The largest eps of a sampling case over a grid of its KNOB_RANGES (k does not change the law): every
    output law at TV >= that distance from the exact one at the drawn knobs fails with probability >= 0.999
    (at the grid's settings; between them eps varies smoothly). None for a case whose law is fixed."""
    from speclab.toy import sequence_law

    from .stats import case_eps

    name = case_name.split("toy pair, ", 1)[-1]
    if name not in KNOB_RANGES or KNOB_RANGES[name][1:] == (None, None, None):
        return None
    _, temp, top_k, top_p, _ = SAMPLING_SETTINGS[name]
    _, temps, top_ks, top_ps = KNOB_RANGES[name]
    t, _ = toy_pair(0)
    worst = 0.0
    for tv in _grid(temps, temp):
        for kv in _grid(top_ks, top_k, integer=True):
            for pv in _grid(top_ps, top_p):
                law, conts = sequence_law(t, TOY_PROMPT, TOY_NEW, tv, kv, pv)
                case = ExactnessCase("grid", _first_two_law(law, conts), n, lambda fn, rng, m: None)
                worst = max(worst, case_eps(case, alpha))
    return worst


def _first_two_law(law: np.ndarray, conts: list) -> np.ndarray:
    """Law of (first token, second token), index 4 * first + second, from the law of whole continuations."""
    out = np.zeros(16)
    for prob, c in zip(law, conts):
        out[4 * c[0] + c[1]] += prob
    return out


def sampling_cases() -> list[ExactnessCase]:
    from speclab.toy import sequence_law

    t, d = toy_pair(0)
    cases = []
    for base, (name, k, temp, top_k, top_p, n) in sampling_settings().items():
        law, conts = sequence_law(t, TOY_PROMPT, TOY_NEW, temp, top_k, top_p)

        def draw(fn, rng, n, k=k, temp=temp, top_k=top_k, top_p=top_p, name=name):
            gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
            prompt = torch.tensor(TOY_PROMPT)
            out = np.empty(n, dtype=np.int64)
            results = call_each(fn, [(t, d, prompt, TOY_NEW, k)] * n, temperature=temp, top_k=top_k, top_p=top_p,
                                generator=gen)
            for j, result in enumerate(results):
                new, _ = result
                new = [int(x) for x in new]
                if len(new) != TOY_NEW or not all(0 <= x < 4 for x in new):
                    raise AssertionError(f"[{name}] asked for {TOY_NEW} new tokens in a vocabulary of 4, got {new}")
                out[j] = 4 * new[0] + new[1]
            return out

        labels = [f"first two tokens {a}{b}" for a in range(4) for b in range(4)]
        # the targeted case passes early once clearly within its target (stats.early_passes); the two sized
        # for time are too small for an early look to pass and keep one look
        cases.append(ExactnessCase(f"speculative_decode on the toy pair, {name}", _first_two_law(law, conts), n, draw,
                                   labels, guarantee="the joint law of the first two emitted tokens" + (
                                       ", at knobs drawn per run (KNOB_RANGES)" if base != TARGETED else ""),
                                   eps=EPS_TARGET if base == TARGETED else None))
    return cases
