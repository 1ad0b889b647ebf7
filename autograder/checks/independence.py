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
when its S_L passes the threshold; no bound is claimed for it. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import math

import numpy as np

ALPHA_LAGS = 1e-9  # false-failure budget of one call of `check_lags` (all lags together)


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
