"""The tests of independence (autograder/checks/independence.py), at every lag and between any two rows: their
false-failure bounds hold for independent draws (checked against the bound at a level where failures would
show), draws that repeat exactly at a lag with enough pairs always fail, and so do two rows that share their
random numbers, whichever two rows they are."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from autograder.checks.independence import (DependenceFailure, check_lags, check_row_pairs, half_set, min_pairs,
                                            pair_calls, pair_power, pair_threshold)
from autograder.checks.lab1_cases import N_BATCH, N_SAMPLER, PAIR_CALLS, PAIR_CASE, PAIR_ROWS, exact_law, fixed_pairs

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


# ------------------------------------------------------------------ any two rows
def test_independent_rows_pass_any_two_rows_at_the_stated_rate():
    """200 batches of 64 independent rows over 20 calls, tested at alpha = 0.05: 25 or more failures would happen
    with probability < 1e-3 if the union bound held (the binomial tails are exact; the union bound is loose)."""
    rng = np.random.default_rng(11)
    fails = 0
    for _ in range(200):
        try:
            check_row_pairs(rng.choice(4, size=(20, 64), p=LAW), LAW, "rows", alpha=0.05)
        except DependenceFailure:
            fails += 1
    assert st.binom.sf(fails - 1, 200, 0.05) > 1e-3, fails


def test_the_threshold_is_the_binomial_tail_at_the_level_per_pair():
    """a* is the first count whose exact binomial upper tail is within alpha / pairs, checked against scipy.stats."""
    for calls, s, rows in ((48, 0.108, 2048), (16, 0.3, 100), (10, 0.5, 10)):
        a = pair_threshold(calls, s, rows)
        level = 1e-9 / (rows * (rows - 1) / 2)
        assert a > calls or st.binom.sf(a - 1, calls, s) <= level
        assert a == 0 or st.binom.sf(a - 2, calls, s) > level
    assert pair_threshold(3, 0.5, 2048) == 4  # three calls can never be that unlikely: no pair can fail


@pytest.mark.parametrize("pairing", ["mirror", "fixed permutation", "one far pair"])
def test_rows_that_share_their_numbers_fail_whichever_rows_they_are(pairing):
    """Rows that take another row's random numbers (the same law, so the same token in every call) fail with
    probability 1 at the lab's calls, for a pairing at no fixed distance."""
    p, q = fixed_pairs()[PAIR_CASE]
    law = exact_law(p, q)
    rng = np.random.default_rng(3)
    y = rng.choice(len(law), size=(PAIR_CALLS, PAIR_ROWS), p=law)
    if pairing == "mirror":
        y[:, PAIR_ROWS // 2:] = y[:, :PAIR_ROWS // 2][:, ::-1]
    elif pairing == "fixed permutation":
        order = np.random.default_rng(0).permutation(PAIR_ROWS)
        y[:, order[1::2]] = y[:, order[0::2]]
    else:
        y[:, 1999] = y[:, 17]
    with pytest.raises(DependenceFailure) as err:
        check_row_pairs(y, law, "rows")
    assert err.value.exact_repeat and "share their random numbers" in str(err.value)
    assert PAIR_CALLS >= pair_calls(PAIR_ROWS, float(np.sum(law ** 2)))  # enough calls for probability 1


def test_rows_that_share_most_of_the_time_fail_as_often_as_stated():
    """Pairs of rows that share their numbers in a fraction rho of calls fail about as often as pair_power says
    (one pair per batch here, 60 batches; a rate far below the bound fails)."""
    p, q = fixed_pairs()[PAIR_CASE]
    law = exact_law(p, q)
    s = float(np.sum(law ** 2))
    rho, rows = 0.8, 256
    rng = np.random.default_rng(5)
    caught = 0
    for _ in range(60):
        y = rng.choice(len(law), size=(PAIR_CALLS, rows), p=law)
        shared = rng.random(PAIR_CALLS) < rho
        y[shared, 200] = y[shared, 3]
        try:
            check_row_pairs(y, law, "rows")
        except DependenceFailure:
            caught += 1
    power = pair_power(PAIR_CALLS, s, rows, rho)
    assert power > 0.9 and st.binom.cdf(caught, 60, power) > 1e-4, (caught, power)


def test_the_lag_test_alone_does_not_see_a_mirror():
    """Why the pair test exists: one call of mirrored rows passes the test at every lag."""
    p, q = fixed_pairs()[PAIR_CASE]
    law = exact_law(p, q)
    y = np.random.default_rng(9).choice(len(law), size=PAIR_ROWS, p=law)
    y[PAIR_ROWS // 2:] = y[:PAIR_ROWS // 2][::-1]
    check_lags(y, law, "rows", "rows")
