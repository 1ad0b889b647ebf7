"""Lab 1's vocabulary of real-model size: a 32,000-token pair, and tests of where a sampler's tokens fall by rank.

A sampler written for speed may cut a distribution to its largest entries: the residual drawn from its top m
entries, the draft drawn from its top m, the target cut to its top m (a top-k before the acceptance test), or
every entry below a threshold dropped. On a small vocabulary nothing is cut; on 32,000 tokens such a sampler
moves mass away from the tokens ranked low. A distance test over 32,000 outcomes could not see that at any
affordable n, so these cases test the mass of rank classes instead.

The pair. p (target) and q (draft) are Zipf-like over VOCAB tokens, q a noisy, flatter copy of p; each keeps a
large share of its mass outside its top 32, 256 and 1024 entries, and so does the residual
r = norm(max(0, p - q)) (`big_pair`; the shares are in the power report). Under a grading run's key the tokens
are relabelled by a permutation of the run's own (`hidden.relabelling`): which token ids are "low ranked" is
not something a submission can know.

The tests (`RankCase`). The grader draws n outcomes and counts those that fall in each tail set T: the tokens
ranked beyond a cut under one order (p, q or r, largest first). The cuts are ranks 32, 256 and 1024, and the
ranks where the order's own mass left beyond falls to 1/2, 1/4, ..., 1/256 (`tail_sets`). Under a correct
sampler the count N_T is Binomial(n, P(T)) exactly; each test rejects when N_T falls outside its two-sided
region, whose tails each have probability <= a / 2 (exact binomial tails, scipy.special.bdtr); a = the case's
share of the cell's false-failure budget divided by the number of tests (Bonferroni), so the case fails a
correct sampler with probability <= its share, for every seed.
* Law case: the sampler drafts its own tokens (`speculative_sample(p, q, rng)`); the outcome is the emitted
  token, law p; tails under p, q and r.
* Coupling case: the grader hands the draft x ~ q (`speculative_sample(p, q, rng, x)`); the outcome is
  "accepted" when the sampler returns x, else the token y it returned. A correct sampler accepts with
  probability alpha = sum min(p, q) and, after a rejection, draws y from r, so y != x and r(y) > 0: any other
  token fails at once. Tests: the count of acceptances, and the tails of the rejected tokens under r (where a
  residual cut to its top entries has no mass at all).

Power within the class (`truncated_laws`, `class_power`): every sampler of the class "the residual, the draft
or the target cut to its top m entries, m = 1 .. VOCAB" (a threshold on entries is the cut at the rank where
entries fall below it, so the class holds every thresholded sampler of those kinds), whose output law, and
whose law of (acceptance, rejected token), is computed exactly here. For each member at total variation
>= CLASS_EPS from p, the exact probability that one test rejects is a lower bound on the power; the report
states the least of these over the class. The class covers the shortcuts a student writing for speed, or a
serving system, would take; a wrong law outside it is left to the distance tests of the smaller pairs.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import special

from . import hidden

VOCAB = 32000  # a real model's vocabulary (Llama 2's size)
RANK_CUTS = (32, 256, 1024)  # tails beyond these ranks under each order
MASS_LEVELS = 8  # and beyond the ranks where the order's mass left falls to 1/2, ..., 1/2^8
CLASS_EPS = 0.02  # the class's members at total variation >= this are caught with the stated power
ACCEPTED = VOCAB  # the coupling case's outcome for "the sampler returned the grader's draft"
ORDERS = {"p": "the target p", "q": "the draft q", "r": "the residual norm(max(0, p - q))"}


def big_pair() -> tuple[np.ndarray, np.ndarray]:
    """(p, q) over VOCAB tokens as written (no key): p Zipf-like with noise on its log-probabilities, q a flatter
    copy (temperature 1 / 0.9) with noise of its own, like a small model beside a large one."""
    rng = np.random.default_rng(32000)
    ranks = rng.permutation(VOCAB) + 1
    logp = -np.log(ranks) + rng.normal(0.0, 0.3, VOCAB)
    logq = 0.9 * logp + rng.normal(0.0, 0.8, VOCAB)
    p, q = np.exp(logp - logp.max()), np.exp(logq - logq.max())
    return p / p.sum(), q / q.sum()


def keyed_pair() -> tuple[np.ndarray, np.ndarray]:
    """big_pair with its tokens relabelled under a grading run's key (as written without one)."""
    p, q = big_pair()
    perm = hidden.relabelling("pair 32000-token vocabulary", VOCAB)
    return p[perm], q[perm]


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    diff = np.maximum(p - q, 0.0)
    return diff / diff.sum()


def order_of(weights: np.ndarray) -> np.ndarray:
    """Tokens by decreasing weight (ties by token id, so the order is the same on every machine)."""
    return np.argsort(-weights, kind="stable")


def cuts(weights: np.ndarray) -> list[int]:
    """The ranks a tail set starts after: RANK_CUTS, and the first rank whose weight left beyond is <= 2^-i."""
    left = 1.0 - np.cumsum(weights[order_of(weights)])
    found = set(RANK_CUTS)
    for i in range(1, MASS_LEVELS + 1):
        found.add(int(np.argmax(left <= 2.0 ** -i)) + 1)
    return sorted(c for c in found if c < np.count_nonzero(weights))


@dataclass(frozen=True)
class TailTest:
    """Count the outcomes in `members`; a correct sampler's count is Binomial(n, prob); reject below lo or above hi."""

    what: str  # e.g. "tokens ranked beyond 1024 under the draft q"
    members: np.ndarray  # (K,) bool over the case's outcomes
    prob: float
    lo: int  # reject when the count is < lo
    hi: int  # or > hi

    def rejects(self, n: int, prob: float) -> float:
        """P(this test rejects) when the count is Binomial(n, prob)."""
        return float(self.rejects_each(n, np.array([prob]))[0])

    def rejects_each(self, n: int, probs: np.ndarray) -> np.ndarray:
        """rejects for each of several probabilities."""
        probs = np.clip(np.asarray(probs, dtype=float), 0.0, 1.0)
        low = special.bdtr(self.lo - 1, n, probs) if self.lo > 0 else np.zeros_like(probs)
        return low + special.bdtrc(self.hi, n, probs)


def region(n: int, prob: float, a: float) -> tuple[int, int]:
    """The acceptance region [lo, hi] of a count ~ Binomial(n, prob): P(N < lo) <= a / 2 and P(N > hi) <= a / 2."""
    counts = np.arange(n + 1)
    below = special.bdtr(counts, n, prob)  # P(N <= c)
    above = special.bdtrc(counts, n, prob)  # P(N > c)
    lo = int(np.argmax(below > a / 2))  # the smallest c with P(N <= c) > a / 2: P(N < lo) <= a / 2
    hi = int(np.argmax(above <= a / 2))  # the smallest c with P(N > c) <= a / 2
    return lo, hi


@dataclass(frozen=True)
class RankCase:
    """A statistical case of the large vocabulary: n outcomes, the exact law of one, and its tail sets; called
    with the case's false-failure budget (split evenly over its tests), as a stats.ExactnessCase is."""

    name: str
    law: np.ndarray  # (K,) the outcome's exact law under a correct sampler
    n: int
    draw: Callable[[Callable, np.random.Generator, int], np.ndarray]
    tails: list[tuple[str, np.ndarray]]  # (what, members) of every tail set
    follows: str = "the target distribution p"
    batched: bool = False
    guarantee: str = ""
    impossible: str = "has probability 0 under p"  # what an outcome of probability 0 is, in messages
    _tests: dict = field(default_factory=dict, repr=False, compare=False)  # tests(budget) by budget, and the sets
    class_eps = CLASS_EPS  # the power report's eps of this case: within the class of truncated samplers
    stream = False  # what the power report asks of every case
    eps = None
    lag_calls = 0
    pair_tests = 0

    def tests(self, budget: float) -> list[TailTest]:
        """The tests at this budget (computed once per budget: a region costs n + 1 binomial tails)."""
        if budget not in self._tests:
            law = np.asarray(self.law, dtype=float)
            a = budget / len(self.tails)
            self._tests[budget] = [TailTest(what, members, float(law[members].sum()),
                                            *region(self.n, float(law[members].sum()), a))
                                   for what, members in self.tails]
        return self._tests[budget]

    def false_failure(self, budget: float) -> float:
        """P(a correct sampler fails the case) <= the sum over the tests of their exact rejection probabilities
        (<= budget)."""
        return float(sum(t.rejects(self.n, t.prob) for t in self.tests(budget)))

    def check(self, fn: Callable, rng: np.random.Generator, budget: float) -> int:
        """Draw n outcomes from fn and run every test; raise ExactnessFailure at the first it fails."""
        from .stats import ExactnessFailure

        tests = self.tests(budget)
        outcomes = np.asarray(self.draw(fn, rng, self.n))
        if outcomes.shape != (self.n,):
            raise AssertionError(f"[{self.name}] expected {self.n} outcomes, got shape {outcomes.shape}")
        if outcomes.size and (outcomes.min() < 0 or outcomes.max() >= len(self.law)):
            raise AssertionError(f"[{self.name}] an outcome is outside the {len(self.law)} possible values")
        counts = np.bincount(outcomes.astype(np.int64), minlength=len(self.law))
        impossible = np.flatnonzero((counts > 0) & (np.asarray(self.law) == 0))
        if impossible.size:  # fails at once, whatever the counts
            raise ExactnessFailure(f"[{self.name}] your samples do not follow {self.follows}: token "
                                   f"{int(impossible[0])} {self.impossible}")
        if "members" not in self._tests:  # every tail set as a row of 0s and 1s: all counts in one product
            self._tests["members"] = np.stack([m for _, m in self.tails]).astype(float)
        in_tails = np.rint(self._tests["members"] @ counts.astype(float)).astype(np.int64)
        for test, got in zip(tests, in_tails):
            got = int(got)
            if not test.lo <= got <= test.hi:
                hint = (" Too few: a sampler that keeps only a distribution's largest entries (a top-k, a "
                        "threshold, a residual or a draft cut short) does this on a vocabulary this large."
                        if got < test.lo and "ranked beyond" in test.what else "")
                raise ExactnessFailure(
                    f"[{self.name}] your samples do not follow {self.follows}: {got} of your {self.n} samples "
                    f"({got / self.n:.4f}) are {test.what}; a correct sampler puts {test.prob:.4f} of its samples "
                    f"there, {test.lo} to {test.hi} of {self.n} except with probability "
                    f"{budget / len(tests):.1e}.{hint}")
        return self.n

    def power(self, budget: float, wrong_law: np.ndarray) -> float:
        """Exact lower bound on P(the case fails) when the outcomes follow wrong_law: its most powerful test."""
        wrong = np.asarray(wrong_law, dtype=float)
        return max(t.rejects(self.n, float(wrong[t.members].sum())) for t in self.tests(budget))

    def power_from_outcomes(self, budget: float, outcomes: np.ndarray, conf_fail: float) -> float:
        """Lower bound on the power against an implementation whose i.i.d. outcomes (fresh seeds) are given: each
        test's set gets a Clopper-Pearson interval [low, high] for its probability R (all intervals hold together
        except with probability <= conf_fail); for every R in it, P(count < lo) is at least its value at high
        and P(count > hi) at least its value at low; the best test's bound is taken."""
        outcomes = np.asarray(outcomes, dtype=np.int64)
        m = len(outcomes)
        counts = np.bincount(outcomes, minlength=len(self.law))
        tests = self.tests(budget)
        level = conf_fail / (2 * len(tests) + 1)
        best = 0.0
        bad = int(counts[np.asarray(self.law) == 0].sum())
        if bad:  # outcomes of probability 0 fail the case at once: P(one among n) >= 1 - (1 - rho_low)^n
            rho = float(special.betaincinv(bad, m - bad + 1, level))
            best = -math.expm1(self.n * math.log1p(-rho))
        for t in tests:
            hits = int(counts[t.members].sum())
            low = float(special.betaincinv(hits, m - hits + 1, level)) if hits > 0 else 0.0
            high = float(special.betaincinv(hits + 1, m - hits, 1 - level)) if hits < m else 1.0
            below = float(special.bdtr(t.lo - 1, self.n, high)) if t.lo > 0 else 0.0
            best = max(best, below, float(special.bdtrc(t.hi, self.n, low)))
        return best


def tail_sets(weights: dict[str, np.ndarray], outcomes: int) -> list[tuple[str, np.ndarray]]:
    """(what, members) of every tail: the tokens ranked beyond each cut of each order (members over `outcomes`
    outcomes, the first VOCAB of which are the tokens)."""
    sets = []
    for name, w in weights.items():
        order = order_of(w)
        for c in cuts(w):
            members = np.zeros(outcomes, dtype=bool)
            members[order[c:]] = True
            sets.append((f"tokens ranked beyond {c} under {ORDERS[name]}", members))
    return sets


def law_case(name: str, n: int, draw: Callable, batched: bool = False) -> RankCase:
    """The emitted token's law (p), tested by its tails under p, q and r."""
    p, q = keyed_pair()
    return RankCase(name, p, n, draw, tail_sets({"p": p, "q": q, "r": residual(p, q)}, VOCAB),
                    batched=batched, guarantee=GUARANTEE)


def coupling_law(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Law of the coupling case's outcome: ACCEPTED with probability alpha, else token y with (1 - alpha) r(y)."""
    mass = np.maximum(p - q, 0.0)
    return np.append(mass, np.minimum(p, q).sum())


def coupled_case(name: str, n: int, draw: Callable, batched: bool = False) -> RankCase:
    """(accepted, or the rejected token): the count of acceptances and the rejected tokens' tails under r."""
    p, q = keyed_pair()
    law = coupling_law(p, q)
    accepted = np.zeros(VOCAB + 1, dtype=bool)
    accepted[ACCEPTED] = True
    tails = [("acceptances of the grader's draft", accepted)]
    tails += [(f"rejections followed by {what[0].lower()}{what[1:]}", members)
              for what, members in tail_sets({"r": residual(p, q)}, VOCAB + 1)]
    return RankCase(name, law, n, draw, tails, batched=batched, guarantee=GUARANTEE,
                    impossible="came after a rejection of the grader's draft, but the residual norm(max(0, p - q)) "
                               "gives it probability 0 (p <= q there): a rejected draft is replaced by a draw from "
                               "the residual",
                    follows="speculative sampling's law of (acceptance of the grader's draft x, the token after a "
                            "rejection)")


GUARANTEE = (f"every sampler that cuts the residual, the draft or the target to its top m entries or below a "
             f"threshold, at total variation >= {CLASS_EPS} from p (the power report gives the least power over "
             f"all m)")


# ----------------------------------------------------------------------------- the class of truncated samplers
FAMILIES = {"residual": "the residual cut to its top m entries",
            "draft": "drafts drawn from q cut to its top m entries (the full q in the test and the residual)",
            "target": "the target cut to its top m entries before the test (a top-k; the output is p_m)"}


def truncated_law(family: str, m: int, p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(output law, law of the coupling case's outcome) of one member of the class, computed directly:
    * "residual": the residual cut to its top m (renormalised): output min(p, q) + (1 - alpha) r_m; with the
      grader's drafts, acceptances unchanged and rejected tokens drawn from r_m;
    * "draft": drafts from q cut to its top m, accepted with min(1, p / q) and resampled from r: output
      q_m a + (1 - beta) r, beta = sum q_m a; given the grader's drafts it is exact;
    * "target": p cut to its top m before the test: the output is p_m; with the grader's drafts, acceptance
      min(1, p_m / q) and rejected tokens from norm(max(0, p_m - q)).
    """
    weights = {"residual": residual(p, q), "draft": q, "target": p}[family]
    keep = np.zeros(len(p), dtype=bool)
    keep[order_of(weights)[:m]] = True
    cut = np.where(keep, weights, 0.0) / weights[keep].sum()
    alpha = np.minimum(p, q).sum()
    if family == "residual":
        return np.minimum(p, q) + (1 - alpha) * cut, np.append((1 - alpha) * cut, alpha)
    if family == "draft":
        a = np.minimum(1.0, p / q)
        return cut * a + (1 - (cut * a).sum()) * residual(p, q), coupling_law(p, q)
    return cut, coupling_law(cut, q)


def member_masses(family: str, p: np.ndarray, q: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """For every m = 1 .. V - 1 at once, the output law's mass on each token set: (S, V - 1). sets: (S, V) bool.
    Each member's output is A + c_m B [rank < m] + d_m C (`truncated_law`), so its mass on a set is a cumulative
    sum along the family's order."""
    mn, r = np.minimum(p, q), residual(p, q)
    alpha = mn.sum()
    weights = {"residual": r, "draft": q, "target": p}[family]
    order = order_of(weights)
    kept = np.cumsum(weights[order])[:-1]  # mass of the top m, m = 1 .. V - 1
    sets = np.asarray(sets, dtype=float)

    def head(values: np.ndarray) -> np.ndarray:  # (S, V - 1): sum over the top m of values on each set
        return np.cumsum((sets * values)[:, order], axis=1)[:, :-1]

    if family == "residual":
        return (sets @ mn)[:, None] + (1 - alpha) * head(r) / kept
    if family == "target":
        return head(p) / kept
    beta = np.cumsum(mn[order])[:-1] / kept
    return head(mn) / kept + (1 - beta) * (sets @ r)[:, None]


def member_tv(family: str, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total variation from p of every member, m = 1 .. V - 1: (1 - alpha)(1 - R_m) for the residual family,
    1 - P_m for the target family; for the draft family the member minus p is mn (keep / Q_m - 1) + (alpha -
    beta_m) r, summed exactly for every m, in blocks of members."""
    vocab = len(p)
    mn, r = np.minimum(p, q), residual(p, q)
    alpha = mn.sum()
    weights = {"residual": r, "draft": q, "target": p}[family]
    order = order_of(weights)
    kept = np.cumsum(weights[order])[:-1]
    if family == "residual":
        return (1 - alpha) * (1 - kept)
    if family == "target":
        return 1 - kept
    beta = np.cumsum(mn[order])[:-1] / kept
    rank = np.empty(vocab, dtype=np.int64)
    rank[order] = np.arange(vocab)
    tv = np.empty(vocab - 1)
    for start in range(0, vocab - 1, 256):
        ms = np.arange(start + 1, min(start + 257, vocab))
        keep = rank[None, :] < ms[:, None]
        diff = mn * (keep / kept[ms - 1, None] - 1) + (alpha - beta[ms - 1, None]) * r
        tv[ms - 1] = 0.5 * np.abs(diff).sum(axis=1)
    return tv


@functools.cache
def _big_pair_tv(family: str) -> np.ndarray:
    """member_tv on the pair as written: a relabelling of the tokens changes no member's distance (the pair has no
    ties, so the orders follow the relabelling)."""
    return member_tv(family, *big_pair())


def class_power(law: RankCase, coupled: RankCase, budget: float, eps: float = CLASS_EPS) -> dict[str, dict]:
    """For each family of the class on the case's pair: its members at total variation >= eps from p, and the
    least power over them (the better of the law case's and the coupling case's most powerful test: a lower
    bound on each member's power), with the member that has it. The coupling case counts for the residual family
    only (given the grader's drafts, a cut draft is exact; the target family is left to the law case: a lower
    bound)."""
    p, q = keyed_pair()
    if not np.array_equal(np.asarray(law.law), p):
        raise ValueError("class_power needs the law case of keyed_pair()")
    law_tests, coupled_tests = law.tests(budget), coupled.tests(budget)
    law_sets = np.stack([t.members for t in law_tests])
    out = {}
    for family in FAMILIES:
        masses, tv = member_masses(family, p, q, law_sets), _big_pair_tv(family)
        power = np.max([t.rejects_each(law.n, row) for t, row in zip(law_tests, masses)], axis=0)
        if family == "residual":
            tokens = np.stack([t.members[:VOCAB] for t in coupled_tests])
            c_masses = member_masses(family, p, q, tokens)
            c_masses -= (tokens @ np.minimum(p, q))[:, None]  # only the rejected tokens' part
            accepted = np.array([t.members[ACCEPTED] for t in coupled_tests])
            c_masses += accepted[:, None] * np.minimum(p, q).sum()
            power = np.maximum(power, np.max([t.rejects_each(coupled.n, row)
                                              for t, row in zip(coupled_tests, c_masses)], axis=0))
        members = np.flatnonzero(tv >= eps)
        # the least power; among members that share it (1 to double precision, say), the one nearest p
        worst = int(members[np.lexsort((tv[members], power[members]))[0]]) if members.size else None
        out[family] = {"doc": FAMILIES[family], "members": int(members.size),
                       "least_power": float(power[worst]) if worst is not None else None,
                       "at": {"m": worst + 1, "tv": round(float(tv[worst]), 4)} if worst is not None else None}
    return out
