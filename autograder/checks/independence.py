"""Independence at every lag: a test that a sequence of draws (one sampler's successive calls, or the rows of
one batch call) has no dependence between draws any distance apart.

The distance tests see the law of one outcome; they cannot see a random stream that repeats (a table of draws
replayed after some tens of thousands of calls) or batch rows that reuse the random numbers of rows far away.
This test looks at every lag L = 1 .. n - 1 at once.

The statistic. Split the tokens into two sets: A (chosen from the exact law so that P(A) is as close to 1/2 as
the law allows) and the rest, and let a_t = s_t - mu with s_t = +1 if token t is in A, else -1, and
mu = 2 P(A) - 1 its exact mean. For every lag L, S_L = sum_t a_t a_{t+L} over the m = n - L pairs, all lags at
once by one FFT.

False failure. For independent draws with the exact law, S_L is a martingale in t + L whose increments are
bounded by c^2, c = 1 + |mu| (E[a_{t+L} | earlier draws] = 0), so Azuma-Hoeffding gives
P(|S_L| >= x) <= 2 exp(-x^2 / (2 m c^4)). The threshold of lag L is the x that makes this alpha / (n - 1), so the
whole test fails a correct implementation with probability <= alpha (union bound over the lags). The bound holds
for any law, any seed and any relabelling of the tokens.

Power, on a stated class: draws that repeat *exactly* at some lag L (y_{t+L} = y_t for every t: a replayed
stream, a row that takes another row's random numbers on the same law). Then a_t a_{t+L} = a_t^2 >= (1 - |mu|)^2
for every t, so S_L >= m (1 - |mu|)^2, which reaches the threshold whenever m >= `min_pairs(...)`: such draws fail
with probability 1, whatever the seed. Weaker dependence (partial reuse, correlation without equality) is caught
when its S_L passes the threshold; no bound is claimed for it.

Any two rows (`check_row_pairs`). A lag test sees one pair of rows per distance pattern only when many pairs share
the distance; a batch whose row b reuses the random numbers of row pi(b), for a pairing pi that is not a shift
(b <-> B - 1 - b, or a fixed permutation), has one pair per distance and is invisible to it. So the grader calls
the batch sampler R times on B identical rows and counts, for every pair of row positions (i, j), the calls in
which rows i and j emit the same token: A_ij. Independent rows with the exact law agree in a call with
probability s = sum_x P(x)^2, independently from call to call, so A_ij ~ Binomial(R, s) exactly. A pair fails
when A_ij >= a*, the smallest count whose binomial upper tail is at most alpha / (B (B - 1) / 2); by the union
bound over the pairs, a correct sampler fails with probability <= alpha, for any law and any seed.

Power, on a stated class: every fixed pairing of rows that share their random numbers on the same law, so that
the two rows emit the same token in every call (A_ij = R). With R >= `pair_calls(...)` calls, s^R is itself at
most alpha / (number of pairs), so a* <= R and such a sampler fails with probability 1, whatever the seed and
the pairing. A pair that shares only part of the time (agreement rate s + rho (1 - s) per call) fails with the
binomial probability `pair_power(...)`; the lab states the rho it reaches 0.999 at. Notation: see the `speclab`
package docstring.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special  # exact binomial tails (scipy.stats is slow to import in a kernel)

ALPHA_LAGS = 1e-9  # false-failure budget of one call of `check_lags` (all lags together)
ALPHA_PAIRS = 1e-9  # false-failure budget of one call of `check_row_pairs` (all pairs of rows together)


class DependenceFailure(AssertionError):
    """Draws that are dependent at some lag. `lag`: where; `exact_repeat`: whether they repeat exactly there;
    `pairs`: n - lag."""

    def __init__(self, message: str, lag: int, pairs: int, exact_repeat: bool):
        super().__init__(message)
        self.lag, self.pairs, self.exact_repeat = lag, pairs, exact_repeat


def half_set(law: np.ndarray) -> np.ndarray:
    """A boolean mask of tokens whose exact probability is as close to 1/2 as a greedy fill gets (largest first)."""
    law = np.asarray(law, dtype=float)
    mask = np.zeros(len(law), dtype=bool)
    mass = 0.0
    for i in np.argsort(-law, kind="stable"):
        if abs(mass + law[i] - 0.5) < abs(mass - 0.5):
            mask[i] = True
            mass += law[i]
    return mask


def thresholds(n: int, mu: float, alpha: float = ALPHA_LAGS) -> np.ndarray:
    """x_L for L = 1 .. n - 1 (index L - 1): Azuma's bound at level alpha / (n - 1) for each lag."""
    pairs = n - np.arange(1, n)
    c2 = (1.0 + abs(mu)) ** 2
    return c2 * np.sqrt(2.0 * pairs * math.log(2.0 * (n - 1) / alpha))


def min_pairs(n: int, mu: float, alpha: float = ALPHA_LAGS) -> int:
    """The fewest pairs m at which an exact repeat always fails: m (1 - |mu|)^2 >= (1 + |mu|)^2 sqrt(2 m ln(..))."""
    if abs(mu) >= 1:
        return n  # a one-token law: nothing to see
    ratio = ((1.0 + abs(mu)) / (1.0 - abs(mu))) ** 4
    return math.ceil(2.0 * math.log(2.0 * (n - 1) / alpha) * ratio)


def check_lags(tokens: np.ndarray, law: np.ndarray, where: str, unit: str = "draws", alpha: float = ALPHA_LAGS) -> None:
    """Raise DependenceFailure if the draws `tokens` (in order), each with exact law `law`, are dependent at some
    lag by the test above; false failure <= alpha for independent draws."""
    tokens = np.asarray(tokens, dtype=np.int64)
    n = len(tokens)
    mask = half_set(law)
    mu = 2.0 * float(np.asarray(law, dtype=float)[mask].sum()) - 1.0
    if n < 3 or abs(mu) >= 1 - 1e-12:
        return
    a = np.where(mask[tokens], 1.0, -1.0) - mu
    size = 1 << (2 * n - 1).bit_length()
    spec = np.fft.rfft(a, size)
    s = np.fft.irfft(spec * np.conj(spec), size)[1:n]  # S_L for L = 1 .. n - 1
    over = np.abs(s) / thresholds(n, mu, alpha)
    worst = int(np.argmax(over))
    if over[worst] < 1:
        return
    lag = worst + 1
    pairs = n - lag
    same = float(np.mean(tokens[:-lag] == tokens[lag:]))
    exact = same == 1.0
    expect = float(np.sum(np.asarray(law, dtype=float) ** 2))
    raise DependenceFailure(
        f"{where}: your {unit} {lag} apart are not independent: {same:.1%} of the {pairs} pairs of {unit} {lag} "
        f"apart have the same token (independent {unit}: about {expect:.1%})"
        + (f", every one of them: the {unit} repeat" if exact else "")
        + ". Take fresh random numbers from `rng` for every draw and every row, never reuse or replay them.",
        lag, pairs, exact)


def pair_threshold(calls: int, s: float, rows: int, alpha: float = ALPHA_PAIRS) -> int:
    """a*: the smallest agreement count over `calls` calls whose Binomial(calls, s) upper tail is at most
    alpha / (rows (rows - 1) / 2); calls + 1 when no count is that unlikely (the test then never fails)."""
    level = alpha / (rows * (rows - 1) / 2)
    counts = np.arange(calls + 1)
    tails = special.bdtrc(counts - 1, calls, s)  # P(A >= a) = P(A > a - 1)
    tails[0] = 1.0
    ok = np.nonzero(tails <= level)[0]
    return int(ok[0]) if ok.size else calls + 1


def pair_calls(rows: int, s: float, alpha: float = ALPHA_PAIRS) -> int:
    """The fewest calls R at which two rows that emit the same token in every call always fail: s^R <= the
    per-pair level, i.e. pair_threshold(R, s, rows) <= R."""
    if s >= 1:
        raise ValueError("a one-token law: two rows always agree, independent or not")
    level = alpha / (rows * (rows - 1) / 2)
    calls = max(1, math.ceil(math.log(level) / math.log(s)))
    while pair_threshold(calls, s, rows, alpha) > calls:  # rounding: one call more
        calls += 1
    return calls


def pair_power(calls: int, s: float, rows: int, rho: float, alpha: float = ALPHA_PAIRS) -> float:
    """The probability that one pair of rows agreeing with probability s + rho (1 - s) per call (it shares its
    random numbers in a fraction rho of the calls) reaches the threshold: a lower bound on the test's power."""
    a = pair_threshold(calls, s, rows, alpha)
    return float(special.bdtrc(a - 1, calls, s + rho * (1 - s))) if a <= calls else 0.0


def check_row_pairs(tokens: np.ndarray, law: np.ndarray, where: str, alpha: float = ALPHA_PAIRS) -> None:
    """Raise DependenceFailure if two rows agree more often than independent rows would: `tokens` (calls, rows)
    holds the tokens of `calls` calls on identical rows of exact law `law`; false failure <= alpha."""
    tokens = np.asarray(tokens, dtype=np.int64)
    calls, rows = tokens.shape
    s = float(np.sum(np.asarray(law, dtype=float) ** 2))
    if rows < 2 or s >= 1 - 1e-12:
        return
    agree = np.zeros((rows, rows), dtype=np.int32)
    for call in tokens:  # rows x rows per call: every pair of positions at once
        agree += call[:, None] == call[None, :]
    np.fill_diagonal(agree, 0)
    a = pair_threshold(calls, s, rows, alpha)
    if agree.max() < a:
        return
    i, j = np.unravel_index(int(np.argmax(agree)), agree.shape)
    i, j = int(min(i, j)), int(max(i, j))
    count = int(agree[i, j])
    over = int(np.count_nonzero(np.triu(agree >= a)))
    raise DependenceFailure(
        f"{where}: rows {i} and {j} are not independent: they emitted the same token in {count} of {calls} calls "
        f"(independent rows: about {s:.1%} of calls; {a} or more happens with probability <= "
        f"{alpha / (rows * (rows - 1) / 2):.0e}); {over} pair(s) of rows reached {a}"
        + (", every time: they share their random numbers" if count == calls else "")
        + ". Take fresh random numbers from `rng` for every row, never reuse one row's numbers for another.",
        j - i, calls, count == calls)


def sharing_caught(calls: int, s: float, rows: int, power: float = 0.999, alpha: float = ALPHA_PAIRS) -> float:
    """The smallest sharing fraction rho (to 0.01) whose pairs fail with probability >= power (1.0 if only
    rows that always share do)."""
    for rho in np.arange(0.01, 1.0, 0.01):
        if pair_power(calls, s, rows, float(rho), alpha) >= power:
            return round(float(rho), 2)
    return 1.0
