"""Tests of speclab.theory: hand-worked values (arithmetic in the comments), exact
enumeration, and properties over random inputs.

Notation: p = target distribution, q = draft distribution, k = draft length,
alpha = acceptance rate, c = T_target / T_draft, N = tokens per step, S = speedup.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from speclab import theory as th


# ------------------------------------------------------------------ hand-worked values
def test_acceptance_rate_and_tv_by_hand():
    # p = (1/2, 1/2), q = (9/10, 1/10): min = (1/2, 1/10), alpha = 6/10.
    # |p - q| = (4/10, 4/10), TV = (1/2)(8/10) = 4/10 = 1 - alpha.
    p, q = [0.5, 0.5], [0.9, 0.1]
    assert th.acceptance_rate(p, q) == pytest.approx(0.6)
    assert th.total_variation(p, q) == pytest.approx(0.4)


def test_kl_by_hand():
    # KL(p||q) with p = (1/2, 1/2), q = (1/4, 3/4):
    # 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3) = 0.1438410362...
    assert th.kl_divergence([0.5, 0.5], [0.25, 0.75]) == pytest.approx(0.5 * math.log(4 / 3))
    # p puts mass where q has none: infinite; the reverse only drops a 0 log 0 term:
    # KL(q||p) with q = (1, 0), p = (1/2, 1/2) is 1 ln 2.
    assert th.kl_divergence([0.5, 0.5], [1.0, 0.0]) == math.inf
    assert th.kl_divergence([1.0, 0.0], [0.5, 0.5]) == pytest.approx(math.log(2))


def test_pinsker_bound_by_hand():
    # KL = 0.08: sqrt(0.04) = 0.2, bound 0.8; KL = 8: sqrt(4) = 2, bound clipped to 0.
    assert th.pinsker_lower_bound(0.08) == pytest.approx(0.8)
    assert th.pinsker_lower_bound(8.0) == 0.0


@pytest.mark.parametrize(
    "alpha, k, bonus, expected",
    [
        (0.5, 3, True, 1.875),  # 1 + 1/2 + 1/4 + 1/8 = 15/8; closed form (1 - 1/16)/(1/2) = 15/8
        (0.5, 3, False, 1.75),  # 1 + 1/2 + 1/4 = 7/4 = (1 - 1/8)/(1/2)
        (0.8, 4, True, 3.3616),  # 1 + .8 + .64 + .512 + .4096
        (0.0, 5, True, 1.0),  # every draft rejected: only the corrected token
        (1.0, 5, True, 6.0),  # every draft accepted plus the bonus: k + 1
        (1.0, 5, False, 5.0),
        (0.3, 0, True, 1.0),  # k = 0 is plain decoding
    ],
)
def test_expected_tokens_by_hand(alpha, k, bonus, expected):
    assert th.expected_tokens(alpha, k, bonus=bonus) == pytest.approx(expected)


def test_tokens_pmf_by_hand():
    # alpha = 1/2, k = 2, bonus: P(N=1) = 1/2 (first rejected), P(N=2) = 1/2 * 1/2,
    # P(N=3) = (1/2)^2 (both accepted, plus the bonus).
    np.testing.assert_allclose(th.tokens_pmf(0.5, 2), [0, 0.5, 0.25, 0.25])
    # without the bonus the two "both accepted" and "second rejected" cases both give N = 2.
    np.testing.assert_allclose(th.tokens_pmf(0.5, 2, bonus=False), [0, 0.5, 0.5, 0])


def test_expected_accepted_and_positional_by_hand():
    # E[A] = E[N] - 1 = 0.5 + 0.25 + 0.125 = 0.875 for alpha = 1/2, k = 3
    assert th.expected_accepted(0.5, 3) == pytest.approx(0.875)
    # alphas (1, 1/2): 1 + 1 + 1 * 1/2 = 2.5; without bonus 1 + 1 = 2
    assert th.expected_tokens_positional([1.0, 0.5]) == pytest.approx(2.5)
    assert th.expected_tokens_positional([1.0, 0.5], bonus=False) == pytest.approx(2.0)
    assert th.expected_tokens_positional([]) == 1.0


def test_speedup_by_hand():
    # alpha = 0.8, k = 4, c = 10: E[N] = 3.3616, step cost 1 + 4/10 = 1.4, S = 2.401142857...
    assert th.step_cost(4, 10) == pytest.approx(1.4)
    assert th.speedup(0.8, 4, 10) == pytest.approx(3.3616 / 1.4)
    # rho convention: rho = 1/10, 1 + 4 * 0.1 = 1.4: the same S
    assert th.speedup_rho(0.8, 4, 0.1) == pytest.approx(3.3616 / 1.4)
    assert th.rho_from_c(20) == pytest.approx(0.05)
    assert th.c_from_rho(0.05) == pytest.approx(20)


def test_break_even_by_hand():
    # k = 1: E[N] = 1 + alpha > 1 + 1/c  <=>  alpha > 1/c
    assert th.break_even_alpha(1, 8) == pytest.approx(1 / 8)
    # k = 2, c = 4: 1 + a + a^2 = 1.5  =>  a = (-1 + sqrt(3)) / 2 = 0.3660254...
    assert th.break_even_alpha(2, 4) == pytest.approx((math.sqrt(3) - 1) / 2)
    # alpha = 1/2, k = 2: E[N] - 1 = 0.75, so c must exceed 2 / 0.75 = 8/3
    assert th.break_even_cost_ratio(0.5, 2) == pytest.approx(8 / 3)
    assert th.break_even_cost_ratio(0.0, 3) == math.inf
    # c = 1/2 and k = 1: even alpha = 1 gives S = 2 / 3 < 1
    assert math.isnan(th.break_even_alpha(1, 0.5))


def test_optimal_k_by_hand():
    # alpha = 0.8, c = 10, S(k) = E[N] / (1 + k/10):
    # k=4: 3.3616/1.4 = 2.4011; k=5: 3.68928/1.5 = 2.4595; k=6: 3.951424/1.6 = 2.46964;
    # k=7: 4.1611392/1.7 = 2.4477.  So k* = 6.
    k_star, s_star = th.optimal_k(0.8, 10)
    assert k_star == 6
    assert s_star == pytest.approx(3.951424 / 1.6)
    # alpha = 0.05, c = 10: S(1) = 1.05/1.1 < 1, so plain decoding (k = 0) wins
    assert th.optimal_k(0.05, 10) == (0, 1.0)


def brute_force_optimum(alpha: float, c: float, k_hi: int, bonus: bool = True) -> tuple[int, float]:
    """Plain loop over k = 0..k_hi with the closed form, no vectorisation, no early stop."""
    best_k, best_s = 0, (1.0 if bonus else -math.inf)
    for k in range(1, k_hi + 1):
        s = th.speedup(alpha, k, c, bonus=bonus)
        if s > best_s:
            best_k, best_s = k, s
    return best_k, best_s


def test_optimal_k_is_never_capped_silently():
    # The old search stopped at k = 100 and returned (100, 57.97) here.
    k_star, s_star = th.optimal_k(0.99, 1000)
    assert (k_star, round(s_star, 2)) == (259, 73.61)
    assert (k_star, s_star) == pytest.approx(brute_force_optimum(0.99, 1000, 2000))
    # an explicit k_max below the optimum is an error, not a wrong answer
    with pytest.raises(ValueError, match="beyond"):
        th.optimal_k(0.99, 1000, k_max=100)
    # an explicit k_max above the optimum gives the same answer as the free search
    assert th.optimal_k(0.99, 1000, k_max=300) == (k_star, s_star)
    # alpha = 1 with a cheap draft has no finite optimum
    with pytest.raises(ValueError, match="without bound"):
        th.optimal_k(1.0, 10)


@pytest.mark.parametrize("alpha, c", [(0.999, 10_000), (0.995, 300), (0.9, 50), (0.5, 3), (0.97, 2000)])
@pytest.mark.parametrize("bonus", [True, False])
def test_optimal_k_matches_brute_force_far_out(alpha, c, bonus):
    k_star, s_star = th.optimal_k(alpha, c, bonus=bonus)
    k_bf, s_bf = brute_force_optimum(alpha, c, 4 * k_star + 200, bonus=bonus)
    assert k_star == k_bf and s_star == pytest.approx(s_bf, rel=1e-12)


# ------------------------------------------------------------- exact enumeration
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("bonus", [True, False])
def test_tokens_pmf_matches_enumeration_of_accept_patterns(k, bonus):
    """Enumerate all 2^k accept/reject patterns with exact fractions; N is read off each."""
    alpha = Fraction(3, 5)
    pmf = [Fraction(0)] * (k + 2)
    for pattern in itertools.product([True, False], repeat=k):
        prob = math.prod(alpha if acc else 1 - alpha for acc in pattern)
        first_reject = next((i for i, acc in enumerate(pattern) if not acc), None)
        if first_reject is None:
            n = k + 1 if bonus else k
        else:
            n = first_reject + 1  # accepted drafts before it, plus the corrected token
        pmf[n] += prob
    np.testing.assert_allclose(th.tokens_pmf(0.6, k, bonus=bonus), [float(x) for x in pmf], atol=1e-14)


# ------------------------------------------------------------------ continuous k*
@pytest.mark.parametrize("alpha", [0.6, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("c", [5.0, 10.0, 20.0, 50.0])
def test_continuous_optimum_matches_lambert_w_and_integer_optimum(alpha, c):
    k_cont = th.optimal_k_continuous(alpha, c)
    # Closed form: with L = -ln(alpha) and z = (c + k) L + 1, the first-order condition
    # becomes z e^{-z} = e^{-1 - L (c - 1)}, so z = -W_{-1}(-e^{-1 - L (c - 1)}).
    L = -math.log(alpha)
    z = -special.lambertw(-math.exp(-1 - L * (c - 1)), k=-1).real
    k_lambert = max(0.0, (z - 1) / L - c)
    assert k_cont == pytest.approx(k_lambert, rel=1e-8, abs=1e-8)
    # S is unimodal in k, so the integer optimum is a neighbour of the continuous one
    k_int, s_int = th.optimal_k(alpha, c, k_max=200)
    assert k_int in (math.floor(k_cont), math.ceil(k_cont))
    # and the FOC root really is a maximum of the continuous S
    s = lambda k: (1 - alpha ** (k + 1)) / ((1 - alpha) * (1 + k / c))  # noqa: E731
    assert s(k_cont) >= max(s(k_cont - 1e-3), s(k_cont + 1e-3))
    assert s(k_cont) >= s_int - 1e-12


def test_continuous_optimum_edge_cases():
    assert th.optimal_k_continuous(0.0, 10) == 0.0
    assert th.optimal_k_continuous(1.0, 10) == math.inf
    assert th.optimal_k_continuous(1.0, 0.5) == 0.0
    # c <= 1: a draft pass costs at least a target pass, S(k) <= (k+1)/(1+k/c) <= 1 = S(0)
    assert th.optimal_k_continuous(0.99, 1.0) == 0.0 and th.optimal_k(0.99, 1.0)[0] == 0
    # alpha = 0.05, c = 10: FOC at k = 0 is -ln(.05) * .05 * 10 - .95 = 1.498 - .95 > 0,
    # so the optimum is a small positive k even though S(1) < 1
    assert 0 < th.optimal_k_continuous(0.05, 10) < 1


def test_positional_optimum_with_decaying_alpha():
    # constant alphas reproduce the constant-alpha optimum (alpha = 0.8, c = 10 -> k* = 6)
    assert th.optimal_k_positional([0.8] * 20, 10)[0] == 6
    # a sharp decay after position 2 cuts k* to 2:
    # S(2) = (1 + .9 + .81)/1.2 = 2.258; S(3) = (2.71 + .81 * .1)/1.3 = 2.147
    k_star, s_star = th.optimal_k_positional([0.9, 0.9, 0.1, 0.1], 10)
    assert k_star == 2 and s_star == pytest.approx(2.71 / 1.2)


# ---------------------------------------------------------------- estimating alpha
def test_alpha_estimators_by_hand():
    # k = 3, accepted per step (2, 0, 3): verified min(3,3) + min(1,3) + min(4,3) = 7
    # pooled = 5/7; per-draft = 5 / (3 * 3) = 5/9
    assert th.alpha_pooled([2, 0, 3], 3) == pytest.approx(5 / 7)
    assert th.alpha_per_draft([2, 0, 3], 3) == pytest.approx(5 / 9)


# ------------------------------------------------------------------------ properties
def test_alpha_equals_one_minus_tv_and_pinsker_on_random_pairs():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = rng.integers(2, 30)
        p = rng.dirichlet(np.full(n, rng.uniform(0.1, 3)))
        q = rng.dirichlet(np.full(n, rng.uniform(0.1, 3)))
        alpha = th.acceptance_rate(p, q)
        assert alpha == pytest.approx(1 - th.total_variation(p, q), abs=1e-12)
        assert alpha == pytest.approx(th.acceptance_rate(q, p), abs=1e-12)
        for kl in (th.kl_divergence(p, q), th.kl_divergence(q, p)):
            assert alpha >= th.pinsker_lower_bound(kl) - 1e-12


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.5, 0.9, 0.99, 1.0])
@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("bonus", [True, False])
def test_pmf_is_a_distribution_with_the_right_mean(alpha, k, bonus):
    pmf = th.tokens_pmf(alpha, k, bonus=bonus)
    assert pmf.sum() == pytest.approx(1.0)
    assert np.all(pmf >= 0) and pmf[0] == 0
    mean = float(np.arange(k + 2) @ pmf)
    assert mean == pytest.approx(th.expected_tokens(alpha, k, bonus=bonus))
    if alpha < 1:  # the closed form (1 - a^(k+1)) / (1 - a)
        top = k + 1 if bonus else k
        assert mean == pytest.approx((1 - alpha**top) / (1 - alpha))


def test_expected_tokens_is_monotone_and_vectorised():
    alphas = np.linspace(0, 1, 101)
    for k in (1, 3, 7):
        en = th.expected_tokens(alphas, k)
        assert en.shape == alphas.shape
        assert np.all(np.diff(en) > 0)
        assert np.all(np.asarray(th.expected_tokens(alphas, k + 1)) >= en)
    s = th.speedup(alphas, 4, 10)
    np.testing.assert_allclose(s, [th.speedup(float(a), 4, 10) for a in alphas])


def test_softmax_temperature():
    logits = np.array([2.0, 1.0, 0.0])
    assert th.softmax(logits).sum() == pytest.approx(1.0)
    # low temperature concentrates on the argmax, high temperature flattens to uniform
    assert th.softmax(logits, 0.01)[0] == pytest.approx(1.0)
    np.testing.assert_allclose(th.softmax(logits, 1e6), [1 / 3] * 3, atol=1e-5)
    # e^2 / (e^2 + e + 1) = 0.66524...
    assert th.softmax(logits)[0] == pytest.approx(math.e**2 / (math.e**2 + math.e + 1))


# ----------------------------------------------------------------- input validation
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: th.expected_tokens(1.2, 3), "alpha"),
        (lambda: th.expected_tokens(-0.1, 3), "alpha"),
        (lambda: th.expected_tokens(float("nan"), 3), "alpha"),
        (lambda: th.expected_tokens(0.5, -1), "k"),
        (lambda: th.expected_tokens(0.5, 2.5), "integer"),
        (lambda: th.expected_tokens(0.5, 0, bonus=False), "k"),
        (lambda: th.speedup(0.5, 3, 0), "c"),
        (lambda: th.speedup(0.5, 3, -2), "c"),
        (lambda: th.optimal_k(0.5, float("inf")), "c"),
        (lambda: th.c_from_rho(0), "rho"),
        (lambda: th.acceptance_rate([0.5, 0.6], [0.5, 0.5]), "sum to 1"),
        (lambda: th.acceptance_rate([1.5, -0.5], [0.5, 0.5]), "negative"),
        (lambda: th.acceptance_rate([0.5, 0.5], [1 / 3] * 3), "same vocabulary"),
        (lambda: th.total_variation([[0.5, 0.5]], [[0.5, 0.5]]), "1-D"),
        (lambda: th.pinsker_lower_bound(-1.0), "KL"),
        (lambda: th.softmax([1.0, 2.0], temperature=0), "temperature"),
        (lambda: th.alpha_pooled([1, 4], 3), "0..k"),
        (lambda: th.alpha_per_draft([], 3), "non-empty"),
        (lambda: th.expected_tokens_positional([0.5, 1.5]), "alpha"),
    ],
)
def test_bad_input_raises_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_kl_of_nearly_equal_distributions_is_never_negative():
    # rounding in sum p log(p/q) can land just below 0 when p ~ q; KL >= 0 must hold
    rng = np.random.default_rng(1)
    for _ in range(500):
        p = rng.dirichlet(np.full(50, 10.0))
        q = p * (1 + 1e-13 * rng.standard_normal(50))
        q /= q.sum()
        assert th.kl_divergence(p, q) >= 0


@pytest.mark.parametrize("bonus", [True, False])
def test_optimal_k_fast_path_matches_a_brute_force_argmax(bonus):
    """The vectorised optimal_k against the slow reference: argmax of speedup() over k."""
    for alpha in np.linspace(0, 1, 21):
        for c in (0.5, 1.0, 3.0, 10.0, 50.0):
            ks = list(range(0 if bonus else 1, 61))
            values = [th.speedup(alpha, k, c, bonus=bonus) for k in ks]
            best = int(np.argmax(values))
            if alpha == 1.0 and (c > 1.0 or not bonus):  # S increases for ever: k_max = 60 is not the optimum
                with pytest.raises(ValueError, match="beyond"):
                    th.optimal_k(alpha, c, k_max=60, bonus=bonus)
                continue
            k_star, s_star = th.optimal_k(alpha, c, k_max=60, bonus=bonus)
            assert k_star == ks[best]
            assert s_star == pytest.approx(values[best], rel=1e-12)
