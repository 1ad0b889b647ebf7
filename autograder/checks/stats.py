"""Exactness tests for samplers with a guaranteed power against every law at a stated distance.

Notation: see the `speclab` package docstring. The "law" of a case is
the exact distribution P over K outcomes that a correct implementation's outcome
follows (computed by enumeration in the lab's checks); n outcomes are drawn, and
P_n is their empirical distribution (counts / n).

The test. Reject when the total variation T = TV(P_n, P) = (1/2) sum_i |P_n(i) - P(i)|
reaches the threshold

    tau = E[T] + sqrt(ln(1 / alpha) / (2 n)),

where E[T] is the exact expectation under a correct implementation (below).

False failure <= alpha, for every n, every law and every seed. T is a function of n
independent outcomes, and changing one outcome moves two counts by one, so T by at
most 1/n. McDiarmid's bounded-differences inequality gives
P(T - E[T] >= s) <= exp(-2 n s^2); with s = tau - E[T] this is alpha exactly. No
large-sample approximation is involved (a chi-square test at 1e-7 would rely on the
asymptotic chi-square tail far out, where it is least accurate). E[T] is exact:
E|N_i - n P(i)| for N_i ~ Binomial(n, P(i)) is de Moivre's mean absolute deviation
2 n P(i) (1 - P(i)) Binomial(n - 1, P(i)).pmf(floor(n P(i))), so
E[T] = sum_i P(i) (1 - P(i)) Binomial(n - 1, P(i)).pmf(floor(n P(i))).

Power >= 0.999 against EVERY law R with TV(R, P) >= eps (worst case, not a few
chosen mutants). Let A = {i : R(i) > P(i)}; then R(A) - P(A) = TV(R, P) = delta and
T >= P_n(A) - P(A), so the test rejects whenever N_A >= n (P(A) + tau), where
N_A ~ Binomial(n, P(A) + delta) when the outcomes follow R. Only a = P(A) is unknown:
the power is at least

    beta(delta) = inf over a in [0, 1 - delta] of P(Binomial(n, a + delta) >= ceil(n (a + tau))).

On each interval of a where the required count c = ceil(n (a + tau)) is constant the
probability grows with a, so the infimum is over the left ends of these intervals: a
finite minimum of exact binomial tails (scipy.special.bdtrc, the function behind
scipy.stats.binom.sf), `worst_case_power`. beta grows with delta, so eps, the
smallest delta with beta(delta) >= 0.999, is found by bisection (`eps_at_power`).
This covers every alternative over the K outcomes: a wrong output law, dependence
between the positions of a block or the rows of a batch (when the outcome is their
joint value), anything. A draw that breaks the output contract (wrong type, length,
a token outside the vocabulary) fails at once.

Early passes (a sequential design). Most submissions are correct, and a correct sampler's
sample looks right long before the n that the worst case needs. A case that states its
design distance eps_d (ExactnessCase.eps) draws its n outcomes in steps, looking at
m_1 < ... < m_J (the fractions LOOKS of n), and PASSES at look j as soon as

    T_j = TV(P_{m_j}, P) < t_j = eps_d - sqrt(ln(J / EARLY_MISS) / (2 m_j)).

It fails only at the last look (as above, with the whole sample) or at the first outcome
of probability 0, so the false-failure bound is unchanged: P(fail) <= P(T_n >= tau) <= alpha.
What an early pass costs is power, and it is bounded for every law R with TV(R, P) = delta:
with A = {i : R(i) > P(i)}, T_j >= P_{m_j}(A) - P(A), so a pass at look j needs the
frequency of A among m_j draws to fall delta - t_j below its mean R(A); Hoeffding's
inequality bounds that by exp(-2 m_j (delta - t_j)^2), which is <= EARLY_MISS / J at
delta = eps_d. The power is then at least worst_case_power(n, tau, delta) minus the sum of
these J bounds (a union bound over the looks), and the stated eps of such a case is the
smallest delta at which that reaches 0.999 (`eps_at_power` with the looks). Against a given
wrong law, `power_lower_bound` subtracts the exact binomial probability of each early pass.

The lab's `n` per case is the smallest meeting its eps target (`n_for_eps`), and
`python -m autograder.audit.power <lab>` prints n, eps, and the false-failure bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import special  # exact binomial functions; scipy.stats (slow to import in a grading kernel) only for power

__all__ = [
    "POWER",
    "ExactnessCase",
    "EARLY_MISS",
    "ExactnessFailure",
    "LOOKS",
    "case_false_failure_bound",
    "case_eps",
    "check_case",
    "eps_at_power",
    "early_passes",
    "expected_tv",
    "n_for_eps",
    "power_from_outcomes",
    "power_lower_bound",
    "threshold",
    "worst_case_power",
]

POWER = 0.999  # power the stated eps guarantees
LOOKS = (0.3, 0.4, 0.55, 0.75)  # early looks of a sequential case, as fractions of its n
EARLY_MISS = 3e-4  # at the design distance, the probability of any early pass of a wrong law (all looks)


class ExactnessFailure(AssertionError):
    """Samples whose frequencies are incompatible with the exact law."""


@dataclass(frozen=True)
class ExactnessCase:
    """One statistical check: draw n outcomes, compare them with the exact law.

    draw(fn, rng, n) calls the student's function fn and returns n outcome indices in
    range(len(law)), independent of earlier draws (a sequential case calls it once per look);
    the same draw is used for grading (fixed seed) and for the power report (other seeds,
    other fn). `guarantee` says in words which laws eps covers.
    """

    name: str
    law: np.ndarray  # (K,) exact law of one outcome under a correct implementation
    n: int  # outcomes drawn in the hidden test
    draw: Callable[[Callable, np.random.Generator, int], np.ndarray]
    labels: Sequence[str] | None = None  # how outcome i is named in messages
    batched: bool = False  # a batch sampler: the power report draws it a whole hidden test at a time
    guarantee: str = "the law of one outcome"
    eps: float | None = None  # design distance of the early passes; None: one look at n (no early pass)
    follows: str = "the target distribution"  # what a correct implementation's outcomes follow, in messages
    stream: bool = False  # one look at n, its draws also tested as one sequence (independence.check_lags): the
    # power report draws it a whole hidden test at a time, as a batched case
    lag_calls: int = 0  # the most calls of independence.check_lags one hidden test makes (each false failure
    # <= independence.ALPHA_LAGS), on top of the distance test's bound
    pair_tests: int = 0  # the calls of independence.check_row_pairs one hidden test makes (each false failure
    # <= independence.ALPHA_PAIRS), on top of the distance test's bound

    def __post_init__(self) -> None:
        law = np.asarray(self.law, dtype=float)
        if law.ndim != 1 or not np.all(law >= 0) or abs(law.sum() - 1) > 1e-9:
            raise ValueError(f"case {self.name}: law must be a probability vector")
        if self.n < 1:
            raise ValueError(f"case {self.name}: n must be >= 1")
        if self.eps is not None and not 0 < self.eps < 1:
            raise ValueError(f"case {self.name}: the design distance eps must be in (0, 1), got {self.eps}")

    def label(self, i: int) -> str:
        return self.labels[i] if self.labels is not None else f"token {i}"


# ----------------------------------------------------------------------------- exact binomial tails
def binom_sf_ge(c: np.ndarray, n: int, prob: np.ndarray) -> np.ndarray:
    """P(N >= c) for N ~ Binomial(n, prob), exactly (scipy.special.bdtrc(c - 1, n, prob))."""
    c, prob = np.broadcast_arrays(np.asarray(c, dtype=float), np.clip(np.asarray(prob, dtype=float), 0, 1))
    out = special.bdtrc(np.clip(c - 1, 0, n), n, prob)
    return np.where(c <= 0, 1.0, np.where(c > n, 0.0, out))


def expected_tv(law: np.ndarray, n: int) -> float:
    """Exact E[TV(P_n, P)] for n i.i.d. draws from P (de Moivre's mean absolute deviation)."""
    law = np.asarray(law, dtype=float)
    p = law[(law > 0) & (law < 1)]
    if p.size == 0:
        return 0.0
    m = np.floor(n * p)
    m = np.minimum(m, n - 1)
    log_pmf = (special.gammaln(n) - special.gammaln(m + 1) - special.gammaln(n - m)
               + m * np.log(p) + (n - 1 - m) * np.log1p(-p))
    return float(np.sum(p * (1 - p) * np.exp(log_pmf)))


def threshold(law: np.ndarray, n: int, alpha: float) -> float:
    """tau: reject when TV(P_n, P) >= tau; P(false failure) <= alpha by McDiarmid."""
    return expected_tv(law, n) + math.sqrt(math.log(1 / alpha) / (2 * n))


def _chunk_bounds(n: int, tau: float, delta: float, jl: np.ndarray, jr: np.ndarray) -> np.ndarray:
    """Lower bound on the power for every a whose required count lies in [jl, jr].

    For such a, a >= a_left = (jl - 1) / n - tau (or 0) and the count needed is <= jr, so
    P(Binomial(n, a + delta) >= count) >= P(Binomial(n, a_left + delta) >= jr); exact when jl == jr.
    """
    a_left = np.maximum((jl - 1) / n - tau - 1e-12, 0.0)  # a hair lower: rounding only lowers the bound
    return binom_sf_ge(jr, n, a_left + delta)


def worst_case_power(n: int, tau: float, delta: float, target: float | None = None) -> float:
    """Lower bound on P(TV(P_n, P) >= tau) when the outcomes follow any R with TV(R, P) >= delta.

    The infimum over a = P(A) in [0, 1 - delta] is taken over the integer counts
    j = ceil(n (a + tau)) by branch and bound: a range of counts gets the bound of
    `_chunk_bounds`, and only ranges that could hold the minimum (or, with `target`, fall
    below it) are split, down to single counts where the bound is exact. With `target`,
    the result is exact when below target and otherwise only guaranteed to be >= target.
    """
    if delta <= tau:
        return 0.0
    if delta >= 1:
        return 1.0
    j0 = math.ceil(n * tau)  # count needed when a = 0
    j_max = min(math.floor(n * (1 - delta + tau)) + 1, n)  # a = (j - 1) / n - tau <= 1 - delta
    edges = np.unique(np.linspace(j0, j_max + 1, 65).astype(np.int64))
    jl, jr = edges[:-1], edges[1:] - 1
    best = np.inf
    while jl.size:
        b = _chunk_bounds(n, tau, delta, jl.astype(float), jr.astype(float))
        exact = jl == jr
        if exact.any():
            best = min(best, float(b[exact].min()))
        if target is not None and best < target:
            return best
        cut = target if target is not None else best
        split = ~exact & (b < cut)
        if target is not None:
            best = min(best, float(b[~split].min())) if (~split).any() else best
        # each range split cut into up to 16 ranges at once: row i holds the edges np.linspace(lo_i, hi_i + 1,
        # 17) cut to integers (non-decreasing), and a range lies between each two distinct edges in a row
        edges = np.linspace(jl[split], jr[split] + 1, 17, axis=1).astype(np.int64)
        keep = edges[:, 1:] > edges[:, :-1]
        jl, jr = edges[:, :-1][keep], edges[:, 1:][keep] - 1
    return float(best)


def early_passes(n: int, eps: float | None) -> list[tuple[int, float]]:
    """[(m_j, t_j)]: pass after m_j outcomes when their TV from the law is < t_j (none without eps).

    t_j = eps - sqrt(ln(J / EARLY_MISS) / (2 m_j)) (Hoeffding); looks whose t_j would be <= 0 are left out."""
    if eps is None:
        return []
    sizes = sorted({int(f * n) for f in LOOKS if 1 <= int(f * n) < n})
    slack = math.log(len(LOOKS) / EARLY_MISS) / 2
    looks = [(m, eps - math.sqrt(slack / m)) for m in sizes]
    return [(m, t) for m, t in looks if t > 0]


def early_miss(looks: Sequence[tuple[int, float]], delta: float) -> float:
    """Hoeffding bound on P(some early pass) for any law at TV delta: sum of exp(-2 m (delta - t)^2)."""
    return float(sum(math.exp(-2 * m * (delta - t) ** 2) if delta > t else 1.0 for m, t in looks))


def eps_at_power(n: int, tau: float, power: float = POWER, looks: Sequence[tuple[int, float]] = ()) -> float:
    """Smallest delta (rounded up to 1e-5) whose worst-case power, early passes counted, is >= power (bisection).

    Without looks that is worst_case_power(n, tau, delta) >= power; with them, the power of the last look
    must reach power + early_miss(looks, delta)."""
    def ok(delta: float) -> bool:
        need = power + early_miss(looks, delta)
        return delta >= 1 or (need <= 1 and worst_case_power(n, tau, delta, target=need) >= need)

    guess = tau + 1.6 / math.sqrt(n)  # the normal approximation at a = 1/2: 3.09 standard deviations of 1/(2 sqrt n)
    lo, hi = guess, guess
    while lo > tau and ok(lo):
        lo = max(tau, lo - 0.02 * guess)
    while not ok(hi):
        lo, hi = hi, min(1.0, hi + 0.02 * guess)
    while hi - lo > 2e-6:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return math.ceil(hi * 1e5) / 1e5


def case_eps(case: ExactnessCase, alpha: float, power: float = POWER) -> float:
    """eps of a case: every output law at TV >= eps from case.law is caught with probability >= power
    (early passes counted)."""
    return eps_at_power(case.n, threshold(case.law, case.n, alpha), power, early_passes(case.n, case.eps))


def n_for_eps(law: np.ndarray, eps: float, alpha: float, power: float = POWER, rel: float = 0.002,
              sequential: bool = False) -> int:
    """Smallest n (to a relative rel, rounded up) whose eps at `power` is <= eps.

    With sequential, the case passes early at the looks designed for eps (ExactnessCase(eps=eps)).
    eps(n) falls like 1 / sqrt(n): a guess from n = 1000 is bracketed, then bisected.
    """
    def eps_of(n: int) -> float:
        return eps_at_power(n, threshold(law, n, alpha), power, early_passes(n, eps if sequential else None))

    def ok(n: int) -> bool:
        return eps_of(n) <= eps

    e0 = eps_of(1000)
    guess = max(1, int(1000 * (e0 / eps) ** 2))
    lo, hi = int(guess * 0.9), int(guess * 1.1) + 1
    while not ok(hi):
        lo, hi = hi, int(hi * 1.2) + 1
    while lo > 1 and ok(lo):
        hi, lo = lo, int(lo * 0.8)
    while hi - lo > max(1, rel * hi):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def case_false_failure_bound(case: ExactnessCase, alpha: float) -> float:
    """McDiarmid's bound exp(-2 n (tau - E[T])^2) on P(a correct implementation fails the case)."""
    s = threshold(case.law, case.n, alpha) - expected_tv(case.law, case.n)
    return float(math.exp(-2 * case.n * s * s))


# ----------------------------------------------------------------------------- the check
def _describe(case: ExactnessCase, counts: np.ndarray, tv: float, tau: float) -> str:
    n = int(counts.sum())
    freq = counts / n
    law = np.asarray(case.law, dtype=float)
    sd = np.sqrt(np.maximum(law * (1 - law) / n, 1e-300))
    z = (freq - law) / sd
    order = np.argsort(-np.abs(freq - law))[:3]
    parts = []
    for i in order:
        dev = "impossible for a correct implementation" if law[i] == 0 and freq[i] > 0 else f"{z[i]:+.1f} standard deviations"
        parts.append(f"{case.label(int(i))}: {freq[i]:.4f} of your samples, expected {law[i]:.4f} ({dev})")
    return (f"[{case.name}] your samples do not follow {case.follows}: the total variation "
            f"between your {n} samples and the exact distribution is {tv:.4f}, a correct implementation "
            f"stays below {tau:.4f} (expected about {expected_tv(law, n):.4f}). Largest differences: "
            + "; ".join(parts))


def check_case(case: ExactnessCase, fn: Callable, rng: np.random.Generator, alpha: float) -> int:
    """Draw outcomes from fn; pass at the first early look whose TV is below its bound (`early_passes`), else
    draw all case.n and raise ExactnessFailure if TV(P_n, law) >= tau. Returns the number of outcomes drawn."""
    law = np.asarray(case.law, dtype=float)
    k = len(law)
    counts = np.zeros(k, dtype=np.int64)
    done = 0
    for m, t in [*early_passes(case.n, case.eps), (case.n, None)]:
        outcomes = np.asarray(case.draw(fn, rng, m - done))
        if outcomes.shape != (m - done,):
            raise AssertionError(f"[{case.name}] expected {m - done} outcomes, got shape {outcomes.shape}")
        if outcomes.size and (outcomes.min() < 0 or outcomes.max() >= k):
            raise AssertionError(f"[{case.name}] an outcome is outside the {k} possible values")
        counts += np.bincount(outcomes.astype(np.int64), minlength=k)
        done = m
        tv = 0.5 * float(np.abs(counts / done - law).sum())
        if np.any(counts[law == 0] > 0):  # impossible for a correct implementation: fails at any look
            raise ExactnessFailure(_describe(case, counts, tv, threshold(law, case.n, alpha)))
        if t is not None and tv < t:
            return done
    tau = threshold(law, case.n, alpha)
    if tv >= tau:
        raise ExactnessFailure(_describe(case, counts, tv, tau))
    return done


# ----------------------------------------------------------------------------- power against a given law
def _power_for_set(n: int, tau: float, p_set: float, r_set: float) -> float:
    """P(N_A >= n (P(A) + tau)) for N_A ~ Binomial(n, r_set): a lower bound on the power."""
    need = math.ceil(n * (p_set + tau))
    return float(binom_sf_ge(np.array(need), n, np.array(r_set)))


def _sequential_power(case: ExactnessCase, alpha: float, p_set: float, r_set: float) -> float:
    """Lower bound on P(case fails) from one set A: the last look's power minus each early look's exact
    probability of a pass through A (a pass at look j needs N_A < m_j (P(A) + t_j))."""
    power = _power_for_set(case.n, threshold(case.law, case.n, alpha), p_set, r_set)
    for m, t in early_passes(case.n, case.eps):
        power -= 1.0 - _power_for_set(m, t, p_set, r_set)
    return max(0.0, power)


def power_lower_bound(case: ExactnessCase, alpha: float, wrong_law: np.ndarray) -> float:
    """Exact lower bound on P(case fails) when the outcomes follow wrong_law instead of case.law."""
    law = np.asarray(case.law, dtype=float)
    wrong = np.asarray(wrong_law, dtype=float)
    a = wrong > law
    return _sequential_power(case, alpha, float(law[a].sum()), float(wrong[a].sum()))


def power_from_outcomes(case: ExactnessCase, alpha: float, outcomes: np.ndarray, conf_fail: float = 1e-4) -> float:
    """Power lower bound against an implementation whose i.i.d. outcomes (fresh seeds) are given.

    The first half of the outcomes picks the set A = {i : P_half(i) > P(i)}; the second
    half, independent of that choice, gives a Clopper-Pearson lower end (level
    1 - conf_fail) of R(A); the exact binomial power of the set A at that value is a lower
    bound on the true power except with probability <= conf_fail.
    """
    from scipy import stats

    outcomes = np.asarray(outcomes, dtype=np.int64)
    law = np.asarray(case.law, dtype=float)
    k = len(law)
    half = len(outcomes) // 2
    first = np.bincount(outcomes[:half], minlength=k) / max(half, 1)
    a = first > law
    second = outcomes[half:]
    m = len(second)
    hits = int(np.isin(second, np.flatnonzero(a)).sum())
    r_low = float(stats.beta.ppf(conf_fail, hits, m - hits + 1)) if hits > 0 else 0.0
    return _sequential_power(case, alpha, float(law[a].sum()), r_low)
