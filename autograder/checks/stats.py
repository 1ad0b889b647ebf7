"""Exactness tests for samplers: exact binomial tails, union bound, computed power.

Notation: see the `speclab` package docstring. The "law" of a case is
the exact distribution a correct implementation's outcome follows.

How a sampler is tested. A case draws n i.i.d. outcomes from the student's code
and compares them with the exact law over K outcomes. For each *event* E (every
single outcome, plus a few pooled sets of outcomes supplied by the case) the count
N_E ~ Binomial(n, P(E)) exactly under a correct implementation. The test rejects
when some N_E falls outside its two-sided region [lo_E, hi_E], where each region
has exact tail mass <= alpha_case / (number of events) (scipy.special.bdtr and bdtrc, the functions behind scipy.stats.binom). By the
union bound the probability that a correct implementation fails the case is
<= alpha_case, exactly, for every n and every law: no large-sample
approximation is involved (a chi-square or G-test at alpha = 1e-7 would lean on
the asymptotic chi-square tail far out where it is least accurate).

Power. For a wrong implementation whose outcome follows another law m, the
probability of a failed case is at least max_E P_m(N_E outside [lo_E, hi_E]),
again an exact binomial computation (`power_lower_bound`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy import special  # binomial tails; scipy.stats (slow to import in a grading kernel) only for power

__all__ = [
    "ExactnessCase",
    "ExactnessFailure",
    "Region",
    "acceptance_region",
    "case_false_failure_bound",
    "check_case",
    "clopper_pearson_toward",
    "event_matrix",
    "power_from_outcomes",
    "power_lower_bound",
]


class ExactnessFailure(AssertionError):
    """Samples whose frequencies are incompatible with the exact law."""


@dataclass(frozen=True)
class ExactnessCase:
    """One statistical check: draw n outcomes, compare with the exact law.

    draw(fn, rng, n) calls the student's function fn and returns n outcome
    indices in range(len(law)); the same draw is used for grading (fixed seed)
    and for the power computation (other seeds, other fn).
    """

    name: str
    law: np.ndarray  # (K,) exact law of one outcome under a correct implementation
    n: int  # outcomes drawn in the hidden test
    draw: Callable[[Callable, np.random.Generator, int], np.ndarray]
    labels: Sequence[str] | None = None  # how outcome i is named in messages
    pooled: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (K,) bool mask
    batched: bool = False  # draw() must get all n at once (a batch sampler): the power uses whole batches

    def __post_init__(self) -> None:
        law = np.asarray(self.law, dtype=float)
        if law.ndim != 1 or not np.all(law >= 0) or abs(law.sum() - 1) > 1e-9:
            raise ValueError(f"case {self.name}: law must be a probability vector")
        for name, mask in self.pooled.items():
            if np.shape(mask) != law.shape:
                raise ValueError(f"case {self.name}: pooled event {name} has the wrong shape")

    def label(self, i: int) -> str:
        return self.labels[i] if self.labels is not None else f"token {i}"


def event_matrix(case: ExactnessCase) -> tuple[np.ndarray, list[str]]:
    """(E, K) 0/1 matrix of the tested events (singletons first) and their names."""
    k = len(case.law)
    rows = [np.eye(k, dtype=bool)]
    names = [case.label(i) for i in range(k)]
    for name, mask in case.pooled.items():
        rows.append(np.asarray(mask, dtype=bool)[None, :])
        names.append(name)
    return np.concatenate(rows, axis=0), names


@dataclass(frozen=True)
class Region:
    """Two-sided acceptance regions lo <= N_E <= hi for every event E."""

    prob: np.ndarray  # (E,) exact P(E) under the law
    lo: np.ndarray  # (E,) smallest accepted count
    hi: np.ndarray  # (E,) largest accepted count
    tail: np.ndarray  # (E,) exact P(N_E < lo) + P(N_E > hi) under the law


def binom_cdf(c: np.ndarray, n: int, prob: np.ndarray) -> np.ndarray:
    """P(N <= c) for N ~ Binomial(n, prob), exactly (scipy.special.bdtr, as scipy.stats.binom.cdf uses)."""
    c, prob = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(prob, dtype=float))
    out = special.bdtr(np.clip(c, 0, n), n, prob)
    return np.where(c < 0, 0.0, np.where(c >= n, 1.0, out))


def binom_sf(c: np.ndarray, n: int, prob: np.ndarray) -> np.ndarray:
    """P(N > c) for N ~ Binomial(n, prob)."""
    c, prob = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(prob, dtype=float))
    out = special.bdtrc(np.clip(c, 0, n), n, prob)
    return np.where(c < 0, 1.0, np.where(c >= n, 0.0, out))


def _smallest(pred, n: int, size: int) -> np.ndarray:
    """Smallest integer c in [0, n] with pred(c) true, elementwise; pred must be monotone in c."""
    lo, hi = np.full(size, -1.0), np.full(size, float(n))  # pred(lo) false (virtually), pred(hi) true
    while np.any(hi - lo > 1):
        mid = np.floor((lo + hi) / 2)
        ok = pred(mid)
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    return hi


def acceptance_region(prob: np.ndarray, n: int, alpha_each: float) -> Region:
    """Exact binomial regions, each with tail mass <= alpha_each (half on each side)."""
    prob = np.clip(np.asarray(prob, dtype=float), 0.0, 1.0)
    half = alpha_each / 2
    # lo = smallest c with P(N <= c) >= half, so P(N < lo) < half
    lo = _smallest(lambda c: binom_cdf(c, n, prob) >= half, n, prob.size)
    # hi = smallest c with P(N > c) <= half
    hi = _smallest(lambda c: binom_sf(c, n, prob) <= half, n, prob.size)
    tail = binom_cdf(lo - 1, n, prob) + binom_sf(hi, n, prob)
    assert np.all(tail <= alpha_each * (1 + 1e-9)), "binomial region exceeds its error budget"
    return Region(prob=prob, lo=lo.astype(np.int64), hi=hi.astype(np.int64), tail=tail)


def _region(case: ExactnessCase, alpha_case: float) -> tuple[np.ndarray, list[str], Region]:
    events, names = event_matrix(case)
    prob = events.astype(float) @ np.asarray(case.law, dtype=float)
    return events, names, acceptance_region(prob, case.n, alpha_case / len(names))


def case_false_failure_bound(case: ExactnessCase, alpha_case: float) -> float:
    """Exact union bound on P(a correct implementation fails this case): sum of the tails."""
    return float(_region(case, alpha_case)[2].tail.sum())


def _describe(case: ExactnessCase, counts: np.ndarray, names, region, events) -> str:
    n = case.n
    freq = counts / n
    law = np.asarray(case.law, dtype=float)
    tv = 0.5 * np.abs(freq - law).sum()
    # typical TV of a correct sampler at this n: sum_i sqrt(law_i (1 - law_i) / n) * sqrt(2/pi) / 2
    typical = 0.5 * np.sqrt(2 / np.pi) * np.sqrt(law * (1 - law) / n).sum()
    ev_counts = events.astype(np.int64) @ counts
    out = (ev_counts < region.lo) | (ev_counts > region.hi)
    # rank the failing events by how many standard deviations they are off
    sd = np.sqrt(np.maximum(n * region.prob * (1 - region.prob), 1e-12))
    z = (ev_counts - n * region.prob) / sd
    order = [i for i in np.argsort(-np.abs(z)) if out[i]][:3]
    parts = [
        f"{names[i]}: {ev_counts[i] / n:.4f} of your samples, expected {region.prob[i]:.4f}"
        f" ({z[i]:+.1f} standard deviations)"
        for i in order
    ]
    return (
        f"[{case.name}] your samples do not follow the target distribution: total variation "
        f"between your {n} samples and the exact distribution is {tv:.4f} (a correct "
        f"implementation gives about {typical:.4f}). Largest differences: " + "; ".join(parts)
    )


def check_case(case: ExactnessCase, fn: Callable, rng: np.random.Generator, alpha_case: float) -> None:
    """Draw case.n outcomes from fn and raise ExactnessFailure if they contradict the law."""
    outcomes = np.asarray(case.draw(fn, rng, case.n))
    k = len(case.law)
    if outcomes.shape != (case.n,):
        raise AssertionError(f"[{case.name}] expected {case.n} outcomes, got shape {outcomes.shape}")
    if outcomes.size and (outcomes.min() < 0 or outcomes.max() >= k):
        raise AssertionError(f"[{case.name}] an outcome is outside the {k} possible values")
    counts = np.bincount(outcomes.astype(np.int64), minlength=k)
    events, names, region = _region(case, alpha_case)
    ev_counts = events.astype(np.int64) @ counts
    if np.any((ev_counts < region.lo) | (ev_counts > region.hi)):
        raise ExactnessFailure(_describe(case, counts, names, region, events))


def clopper_pearson_toward(successes: np.ndarray, m: int, target: np.ndarray, conf_fail: float) -> np.ndarray:
    """The end of the Clopper-Pearson interval (level 1 - conf_fail) nearest to target.

    Used to turn a simulated estimate of a wrong implementation's event probability
    into a pessimistic one: the returned value is at least as close to the correct
    probability as the truth, except with probability conf_fail per event. Where the
    interval contains target, target itself is returned (no claim of power).
    """
    successes = np.asarray(successes, dtype=float)
    from scipy import stats

    a = conf_fail / 2
    lo = np.where(successes > 0, stats.beta.ppf(a, successes, m - successes + 1), 0.0)
    hi = np.where(successes < m, stats.beta.isf(a, successes + 1, m - successes), 1.0)
    return np.clip(target, lo, hi)


def power_lower_bound(case: ExactnessCase, alpha_case: float, wrong_law: np.ndarray) -> float:
    """Exact lower bound on P(case fails) when outcomes follow wrong_law instead of case.law."""
    events, _, region = _region(case, alpha_case)
    m = np.clip(events.astype(float) @ np.asarray(wrong_law, dtype=float), 0.0, 1.0)
    return float(np.max(_outside_prob(region, case.n, m)))


def _outside_prob(region: Region, n: int, m: np.ndarray) -> np.ndarray:
    return binom_cdf(region.lo - 1, n, m) + binom_sf(region.hi, n, m)


def power_from_outcomes(case: ExactnessCase, alpha_case: float, outcomes: np.ndarray, conf_fail: float = 1e-4) -> float:
    """Power lower bound against an implementation whose i.i.d. outcomes (fresh seeds) are given.

    Each event's probability under that implementation is replaced by the end of its
    Clopper-Pearson interval (level 1 - conf_fail) nearest to the correct value, then
    the exact binomial power is taken. The result is a lower bound on the true power
    except with probability <= conf_fail * (number of events).
    """
    events, _, region = _region(case, alpha_case)
    counts = np.bincount(np.asarray(outcomes, dtype=np.int64), minlength=len(case.law))
    ev_counts = events.astype(np.int64) @ counts
    pess = clopper_pearson_toward(ev_counts, len(outcomes), region.prob, conf_fail)
    return float(np.max(_outside_prob(region, case.n, pess)))
