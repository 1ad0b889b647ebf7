"""The test of independence at every lag (autograder/checks/independence.py): its false-failure bound holds for
independent draws (checked against the bound at a level where failures would show), and draws that repeat
exactly at a lag with enough pairs always fail."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from autograder.checks.independence import DependenceFailure, check_lags, half_set, min_pairs
from autograder.checks.lab1_cases import N_BATCH, N_SAMPLER, fixed_pairs

LAW = np.array([0.1, 0.2, 0.3, 0.4])


def test_independent_draws_pass_at_the_stated_rate():
    """200 independent streams tested at alpha = 0.05: under the bound, failures ~ at most Binomial(200, 0.05),
    so 25 or more would happen with probability < 1e-3 if the bound held; in practice Azuma is far from tight."""
    rng = np.random.default_rng(7)
    fails = 0
    for _ in range(200):
        try:
            check_lags(rng.choice(4, size=3000, p=LAW), LAW, "stream", alpha=0.05)
        except DependenceFailure:
            fails += 1
    assert st.binom.sf(fails - 1, 200, 0.05) > 1e-3, fails


@pytest.mark.parametrize("lag", [1, 7, 1000, 20000, 40000, 2**16, 66000 - 330])
def test_an_exact_repeat_at_any_lag_fails(lag):
    rng = np.random.default_rng(lag)
    y = rng.choice(4, size=66000, p=LAW)
    y[lag:] = np.resize(y[:lag], 66000 - lag)  # y[t + lag] = y[t] for every t
    with pytest.raises(DependenceFailure) as err:
        check_lags(y, LAW, "stream")
    assert err.value.exact_repeat and err.value.lag % lag == 0 and "repeat" in str(err.value)


def test_the_courses_laws_have_a_half_set_close_to_one_half():
    """The guarantee strings say L <= n - 330: min_pairs stays within it on every pair whose draws are tested for
    independence (the law cases; a one-hot p has nothing to test)."""
    for name in (set(N_SAMPLER) | set(N_BATCH)) - {"one-hot p"}:
        p, _ = fixed_pairs()[name]
        mu = 2 * p[half_set(p)].sum() - 1
        assert min_pairs(max(N_BATCH.values()), mu) <= 330, (name, mu)


def test_a_one_token_law_is_not_tested():
    check_lags(np.zeros(1000, dtype=int), np.array([0.0, 1.0, 0.0]), "stream")
