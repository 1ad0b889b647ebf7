"""Closed-form theory of speculative decoding: acceptance rate, tokens per step, speedup.

Notation: see the `speclab` package docstring (p, q, k, alpha, c, N, S).

Every function here is pure and small; the book cites the equation each one implements.
On purpose there is no sampler, residual distribution or block verifier in this module:
those are what the chapters define in their own cells and what Lab 1 asks students to
write.

Scalar functions accept numpy arrays for ``alpha`` (and broadcast them), so a heatmap is
one call; they return a Python ``float`` when every input is a scalar.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

__all__ = [
    "as_distribution",
    "acceptance_rate",
    "total_variation",
    "kl_divergence",
    "pinsker_lower_bound",
    "softmax",
    "tokens_pmf",
    "expected_tokens",
    "expected_accepted",
    "expected_tokens_positional",
    "step_cost",
    "speedup",
    "speedup_positional",
    "break_even_cost_ratio",
    "break_even_alpha",
    "optimal_k",
    "optimal_k_continuous",
    "optimal_k_positional",
    "rho_from_c",
    "c_from_rho",
    "speedup_rho",
    "alpha_pooled",
    "alpha_per_draft",
]

_ATOL = 1e-9  # tolerance on "sums to one" for float distributions


# --------------------------------------------------------------------------- validation
def as_distribution(x: ArrayLike, name: str = "p", atol: float = _ATOL) -> np.ndarray:
    """Return ``x`` as a 1-D float array after checking it is a probability vector.

    Raises ``ValueError`` if ``x`` is not 1-D and non-empty, has a NaN/inf or a
    negative entry, or does not sum to 1 within ``atol``.
    """
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D probability vector, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has a non-finite entry")
    if np.any(arr < 0):
        raise ValueError(f"{name} has a negative entry (min {arr.min():.3g})")
    total = arr.sum()
    if abs(total - 1.0) > atol:
        raise ValueError(f"{name} must sum to 1, sums to {total:.12g}")
    return arr


def _pair(p: ArrayLike, q: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p_arr, q_arr = as_distribution(p, "p"), as_distribution(q, "q")
    if p_arr.shape != q_arr.shape:
        raise ValueError(f"p and q must be over the same vocabulary, got {p_arr.shape} and {q_arr.shape}")
    return p_arr, q_arr


def _check_alpha(alpha: ArrayLike) -> np.ndarray:
    a = np.asarray(alpha, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    return a


def _check_k(k: int, minimum: int = 0) -> int:
    if isinstance(k, bool) or not float(k).is_integer():
        raise ValueError(f"k (draft length) must be an integer, got {k!r}")
    k_int = int(k)
    if k_int < minimum:
        raise ValueError(f"k (draft length) must be >= {minimum}, got {k!r}")
    return k_int


def _check_c(c: float, name: str = "c") -> float:
    c_f = float(c)
    if not math.isfinite(c_f) or c_f <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {c!r}")
    return c_f


def _out(x: np.ndarray) -> float | np.ndarray:
    return float(x) if np.ndim(x) == 0 else x


# ----------------------------------------------------------------- distances (ch. 2-4)
def acceptance_rate(p: ArrayLike, q: ArrayLike) -> float:
    """alpha = sum_x min(p(x), q(x)): the probability that a token drawn from q is accepted.

    Example: p = (0.5, 0.5), q = (0.9, 0.1) gives min = (0.5, 0.1), alpha = 0.6.
    """
    p_arr, q_arr = _pair(p, q)
    return float(np.minimum(p_arr, q_arr).sum())


def total_variation(p: ArrayLike, q: ArrayLike) -> float:
    """TV(p, q) = (1/2) sum_x |p(x) - q(x)|, a number in [0, 1]."""
    p_arr, q_arr = _pair(p, q)
    return float(0.5 * np.abs(p_arr - q_arr).sum())


def kl_divergence(p: ArrayLike, q: ArrayLike) -> float:
    """KL(p || q) = sum_x p(x) log(p(x) / q(x)) in nats; ``inf`` if p puts mass where q has none.

    Terms with p(x) = 0 contribute 0 (the limit of t log t as t -> 0). A result that
    rounding pushes just below 0 (p nearly equal to q) is returned as 0.
    """
    p_arr, q_arr = _pair(p, q)
    support = p_arr > 0
    if np.any(q_arr[support] == 0):
        return math.inf
    value = float(np.sum(p_arr[support] * np.log(p_arr[support] / q_arr[support])))
    return max(0.0, value)  # KL >= 0 (Gibbs); rounding can give -1e-17 for p ~ q


def pinsker_lower_bound(kl: ArrayLike) -> float | np.ndarray:
    """Lower bound on alpha from Pinsker's inequality: alpha >= max(0, 1 - sqrt(KL / 2)).

    ``kl`` may be KL(p||q) or KL(q||p): TV is symmetric and Pinsker holds for both.
    """
    kl_arr = np.asarray(kl, dtype=float)
    if np.any(np.isnan(kl_arr)) or np.any(kl_arr < 0):
        raise ValueError(f"KL divergence must be >= 0, got {kl!r}")
    return _out(np.maximum(0.0, 1.0 - np.sqrt(kl_arr / 2.0)))


def softmax(logits: ArrayLike, temperature: float = 1.0) -> np.ndarray:
    """softmax(logits / temperature) along the last axis, computed stably."""
    t = _check_c(temperature, "temperature")
    z = np.asarray(logits, dtype=float) / t
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------ tokens per step (ch. 5)
def tokens_pmf(alpha: float, k: int, bonus: bool = True) -> np.ndarray:
    """Distribution of N, the tokens emitted by one step, when each position is accepted
    with probability ``alpha`` independently of the others.

    Returns an array ``pmf`` of length k + 2 with ``pmf[n] = P(N = n)`` (so ``pmf[0] = 0``).

    With the bonus token: P(N = n) = alpha^(n-1) (1 - alpha) for 1 <= n <= k and
    P(N = k + 1) = alpha^k. Without it (k >= 1): a step that accepts all k drafts emits k
    tokens, so P(N = n) = alpha^(n-1) (1 - alpha) for n < k, P(N = k) = alpha^(k-1), and
    P(N = k + 1) = 0.
    """
    a = float(_check_alpha(alpha))
    k = _check_k(k, minimum=0 if bonus else 1)
    pmf = np.zeros(k + 2)
    n = np.arange(1, k + 1)
    pmf[1 : k + 1] = a ** (n - 1) * (1 - a)  # first rejection at position n
    if bonus:
        pmf[k + 1] = a**k  # all k accepted, plus the bonus token
    else:
        pmf[k] += a**k  # all k accepted, nothing more
    return pmf


def expected_tokens(alpha: ArrayLike, k: int, bonus: bool = True) -> float | np.ndarray:
    """E[N] = (1 - alpha^(k+1)) / (1 - alpha) with the bonus token, (1 - alpha^k) / (1 - alpha)
    without; the alpha -> 1 limits are k + 1 and k.

    Computed as the finite sum 1 + alpha + ... + alpha^k (or up to alpha^(k-1)), which
    equals the closed form and has no 0/0 at alpha = 1.
    """
    a = _check_alpha(alpha)
    k = _check_k(k, minimum=0 if bonus else 1)
    top = k + 1 if bonus else k  # number of terms in the geometric sum
    powers = a[..., None] ** np.arange(top)
    return _out(powers.sum(axis=-1))


def expected_accepted(alpha: ArrayLike, k: int) -> float | np.ndarray:
    """E[A], A = number of accepted draft tokens in a step: alpha + ... + alpha^k = E[N] - 1."""
    a = _check_alpha(alpha)
    k = _check_k(k)
    return _out(np.asarray(expected_tokens(a, k)) - 1.0)


def expected_tokens_positional(alphas: Sequence[float], bonus: bool = True) -> float:
    """E[N] when the draft token at position i is accepted with probability alphas[i-1]
    (given that positions 1..i-1 were accepted): 1 + sum_i prod_{j<=i} alphas[j-1].

    ``len(alphas)`` is k. Without the bonus token the last product is dropped (k >= 1).
    """
    a = _check_alpha(np.asarray(alphas, dtype=float))
    if a.ndim != 1:
        raise ValueError("alphas must be a 1-D sequence, one acceptance rate per position")
    if not bonus and a.size == 0:
        raise ValueError("without the bonus token k must be >= 1")
    survive = np.cumprod(a)  # P(first i drafts all accepted), i = 1..k
    if not bonus:
        survive = survive[:-1]
    return float(1.0 + survive.sum())


# ------------------------------------------------------------------- speedup (ch. 6)
def step_cost(k: int, c: float) -> float:
    """Wall time of one step in units of T_target: k draft passes plus one target pass, 1 + k/c."""
    return 1.0 + _check_k(k) / _check_c(c)


def speedup(alpha: ArrayLike, k: int, c: float, bonus: bool = True) -> float | np.ndarray:
    """S = E[N] / (1 + k/c): tokens per unit time relative to the target alone.

    Assumes verifying k + 1 positions costs one target pass and the draft costs T_target / c
    per token (chapter 7 measures where this breaks).
    """
    c = _check_c(c)
    en = np.asarray(expected_tokens(alpha, k, bonus=bonus))
    return _out(en / (1.0 + _check_k(k) / c))


def speedup_positional(alphas: Sequence[float], c: float, bonus: bool = True) -> float:
    """S with position-dependent acceptance rates, k = len(alphas)."""
    c = _check_c(c)
    return expected_tokens_positional(alphas, bonus=bonus) / (1.0 + len(alphas) / c)


def break_even_cost_ratio(alpha: float, k: int) -> float:
    """The c above which drafting k tokens pays off: S > 1 iff c > k / (E[N] - 1).

    Returns ``inf`` when E[N] = 1 (alpha = 0), where no cost ratio is enough.
    """
    k = _check_k(k, minimum=1)
    gain = float(expected_tokens(alpha, k)) - 1.0
    return math.inf if gain <= 0 else k / gain


def break_even_alpha(k: int, c: float) -> float:
    """The alpha at which S(alpha, k, c) = 1 (S > 1 above it); ``nan`` if even alpha = 1 loses.

    Solves E[N](alpha) = 1 + k/c with brentq; E[N] increases in alpha, so the root is unique.
    For k = 1 it is 1/c.
    """
    k = _check_k(k, minimum=1)
    c = _check_c(c)
    target = 1.0 + k / c
    if float(expected_tokens(1.0, k)) <= target:
        return math.nan
    return float(optimize.brentq(lambda a: float(expected_tokens(a, k)) - target, 0.0, 1.0, xtol=1e-14))


def optimal_k(alpha: float, c: float, k_max: int = 100, bonus: bool = True) -> tuple[int, float]:
    """Integer draft length maximising S over k = 0..k_max (k = 0 is plain decoding, S = 1).

    Returns (k*, S(k*)); ties go to the smaller k.
    """
    k_max = _check_k(k_max, minimum=1)
    a = float(_check_alpha(alpha))
    c = _check_c(c)
    ks = np.arange(k_max + 1)
    # E[N] for k = 0..k_max at once: partial sums of 1 + alpha + alpha^2 + ... (eq. expected tokens)
    partial = np.cumsum(a ** np.arange(k_max + 1))
    if bonus:
        en = partial  # k drafts + bonus: sum_{i=0}^{k} alpha^i
    else:
        en = np.concatenate([[np.nan], partial[:-1]])  # sum_{i=0}^{k-1} alpha^i, k >= 1
    values = en / (1.0 + ks / c)
    if not bonus:
        values[0] = -np.inf  # k = 0 without a bonus token emits nothing
    best = int(np.argmax(values))  # first maximum, i.e. the smallest k among ties
    return best, float(values[best])


def _foc(alpha: float, c: float, k: float) -> float:
    """d/dk log S(alpha, k, c) times (1 - alpha^(k+1)) (c + k), for real k > -c.

    Its sign is the sign of dS/dk:  -ln(alpha) alpha^(k+1) (c + k) - (1 - alpha^(k+1)).
    """
    a_pow = alpha ** (k + 1)
    return -math.log(alpha) * a_pow * (c + k) - (1.0 - a_pow)


def optimal_k_continuous(alpha: float, c: float) -> float:
    """Real k >= 0 maximising S(alpha, k, c) = (1 - alpha^(k+1)) / ((1 - alpha)(1 + k/c)).

    Solves the first-order condition  -ln(alpha) alpha^(k+1) (c + k) = 1 - alpha^(k+1)
    with ``scipy.optimize.brentq``. For c > 1, S has a single stationary point on k > -c,
    a maximum (book, chapter 6), so the answer is that root when it is positive and 0
    otherwise; for c <= 1, S <= 1 = S(0) and the answer is 0. alpha = 0 gives 0; alpha = 1
    gives ``inf`` when c > 1 (S increases towards c without a maximum) and 0 otherwise.
    """
    a = float(_check_alpha(alpha))
    c = _check_c(c)
    if a == 0.0:
        return 0.0
    if a == 1.0:
        return math.inf if c > 1 else 0.0
    if _foc(a, c, 0.0) <= 0:  # S already decreasing at k = 0
        return 0.0
    hi = 1.0
    while _foc(a, c, hi) > 0:  # the FOC turns negative once alpha^(k+1) (c + k) is small
        hi *= 2.0
        if hi > 1e9:
            raise ValueError(f"no optimum found for alpha={alpha}, c={c}")
    return float(optimize.brentq(lambda k: _foc(a, c, k), 0.0, hi, xtol=1e-12))


def optimal_k_positional(alphas: Sequence[float], c: float) -> tuple[int, float]:
    """Best draft length k in 0..len(alphas) when position i has acceptance rate alphas[i-1].

    Returns (k*, S(k*)); ties go to the smaller k.
    """
    a = list(_check_alpha(np.asarray(alphas, dtype=float)).ravel())
    values = [speedup_positional(a[:k], c) for k in range(len(a) + 1)]
    best = int(np.argmax(values))
    return best, values[best]


# ------------------------------------------------------- cost conventions (ch. 6 map)
def rho_from_c(c: float) -> float:
    """rho = T_draft / T_target = 1 / c (the 'c' of Leviathan et al. 2023)."""
    return 1.0 / _check_c(c)


def c_from_rho(rho: float) -> float:
    """c = T_target / T_draft = 1 / rho."""
    return 1.0 / _check_c(rho, "rho")


def speedup_rho(alpha: ArrayLike, k: int, rho: float) -> float | np.ndarray:
    """S in the rho convention: (1 - alpha^(k+1)) / ((1 - alpha)(1 + k rho)); equals speedup(alpha, k, 1/rho)."""
    rho = _check_c(rho, "rho")
    return _out(np.asarray(expected_tokens(alpha, k)) / (1.0 + _check_k(k) * rho))


# --------------------------------------------------- estimating alpha from logs (ch. 5)
def _check_accepted(accepted: ArrayLike, k: int) -> np.ndarray:
    k = _check_k(k, minimum=1)
    acc = np.asarray(accepted)
    if acc.ndim != 1 or acc.size == 0:
        raise ValueError("accepted must be a non-empty 1-D array of per-step accepted counts")
    if not np.all(np.equal(np.mod(acc, 1), 0)) or np.any(acc < 0) or np.any(acc > k):
        raise ValueError(f"accepted counts must be integers in 0..k={k}")
    return acc.astype(np.int64)


def alpha_pooled(accepted: ArrayLike, k: int) -> float:
    """Estimate alpha from per-step accepted counts A (0..k) as accepted / verified tokens.

    A step with A < k verified A + 1 drafts (the last one rejected); a step with A = k
    verified k. So the estimate is sum A / sum min(A + 1, k): the maximum-likelihood
    estimate under a constant per-position alpha.
    """
    acc = _check_accepted(accepted, k)
    verified = np.minimum(acc + 1, k).sum()
    return float(acc.sum() / verified)


def alpha_per_draft(accepted: ArrayLike, k: int) -> float:
    """The naive estimate sum A / (k * steps): biased low, since drafts after the first
    rejection are never verified; its expectation is E[A] / k, not alpha."""
    acc = _check_accepted(accepted, k)
    return float(acc.sum() / (k * acc.size))
