"""Lab 1's 32,000-token cases (autograder/checks/lab1_ranks.py): the pair, the tail tests' exact regions, the class
power's arithmetic, the reference passing the cases under a key, and what a trip to the sandbox holds.

The cut samplers of the catalog refused under a key, the class power over every cut, the sizes' design and the
false failure by simulation cost about a minute together: they are the `catalog` audit's
(tests/audit/test_catalog.py), whose report `make test` checks."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from autograder.authoring import reference as reference_solution
from autograder.checks import hidden, lab1 as L, lab1_ranks as R
from autograder.checks.lab1_cases import batch_cases, sampler_cases
from autograder.checks.stats import ExactnessFailure

TEST_KEY = bytes(range(32))  # as tests/autograder/checks/test_lab1.py

def big(cases) -> list:
    return [c for c in cases if isinstance(c, R.RankCase)]


def test_the_pair_keeps_mass_outside_its_top_entries():
    """Issue 53: the residual and the draft (and the target) keep substantial mass outside their top 32, 256 and
    1024 entries, on a vocabulary of at least 32,000 tokens."""
    p, q = R.big_pair()
    assert len(p) >= 32000 and np.all(p > 0) and np.all(q > 0)
    for w in (p, q, R.residual(p, q)):
        outside = [1 - np.sort(w)[::-1][:m].sum() for m in (32, 256, 1024)]
        assert min(outside) >= 0.1, outside


def test_the_tokens_are_relabelled_under_a_key():
    p, q = R.big_pair()
    with hidden.keyed(TEST_KEY):
        kp, kq = R.keyed_pair()
    assert not np.array_equal(kp, p) and np.array_equal(np.sort(kp), np.sort(p))
    assert np.array_equal(np.argsort(kp), np.argsort(kp))  # the same relabelling of p and q:
    assert np.allclose(kq[np.argsort(kp)], q[np.argsort(p)])


@pytest.mark.parametrize("n, prob, a", [(10000, 0.3, 1e-9), (4000, 0.004, 1e-8), (500, 0.5, 0.05)])
def test_regions_are_the_tightest_with_each_tail_within_half_the_budget(n, prob, a):
    lo, hi = R.region(n, prob, a)
    below = lambda c: special.bdtr(c, n, prob)  # P(N <= c)  # noqa: E731
    above = lambda c: special.bdtrc(c, n, prob)  # P(N > c)  # noqa: E731
    assert (lo == 0 or below(lo - 1) <= a / 2) and below(lo) > a / 2
    assert above(hi) <= a / 2 and above(hi - 1) > a / 2


def test_member_masses_agree_with_each_member_computed_directly():
    """The class table's cumulative sums (member_masses) against truncated_law for chosen m, on a small pair."""
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.full(300, 0.3)), rng.dirichlet(np.full(300, 0.3))
    sets = rng.random((5, 300)) < 0.3
    for family in R.FAMILIES:
        masses, tv = R.member_masses(family, p, q, sets), R.member_tv(family, p, q)
        for m in (1, 2, 17, 150, 299):
            law, _ = R.truncated_law(family, m, p, q)
            assert law.sum() == pytest.approx(1)
            assert masses[:, m - 1] == pytest.approx(sets @ law, abs=1e-12)
            assert tv[m - 1] == pytest.approx(0.5 * np.abs(law - p).sum(), abs=1e-12)


def test_an_impossible_token_after_a_rejection_fails_at_once():
    _, coupled = big(sampler_cases())
    p, q = R.keyed_pair()
    zero = int(np.flatnonzero(p <= q)[0])  # the residual gives it no mass
    outcomes = np.full(coupled.n, R.ACCEPTED)
    outcomes[7] = zero
    case = R.RankCase(coupled.name, coupled.law, coupled.n, lambda fn, rng, n: outcomes, coupled.tails,
                      impossible=coupled.impossible)
    with pytest.raises(ExactnessFailure, match=f"token {zero} came after a rejection"):
        case.check(None, np.random.default_rng(0), 1e-7)


@pytest.fixture(scope="module")
def reference():
    return reference_solution.load("lab1")


@pytest.mark.parametrize("batched", [False, True], ids=["speculative_sample", "speculative_sample_batch"])
def test_the_reference_passes_the_32000_token_cases_under_a_key(reference, batched):
    fn = reference.speculative_sample_batch if batched else reference.speculative_sample
    with hidden.keyed(TEST_KEY):
        cases = batch_cases() if batched else sampler_cases()
        for case in big(cases):
            assert L.run_case(case, fn, np.random.default_rng(2026), L.ALPHA_CELL / len(cases)) == case.n


@pytest.mark.parametrize("batched", [False, True], ids=["speculative_sample", "speculative_sample_batch"])
def test_a_round_trip_to_the_sandbox_holds_at_most_half_a_gigabyte(reference, batched):
    """In the verdict a batch of calls reaches the sandbox as one message, whose harness holds every call's own copy
    of its arrays at once (autograder/inside/harness.py): the 32,000-token cases send few calls per trip. A stand-in
    with the verdict's batch method measures each trip (the arrays as the harness holds them, materialised)."""
    from autograder.checks.calls import BATCH_METHOD

    fn = reference.speculative_sample_batch if batched else reference.speculative_sample
    trips = []

    class StandIn:
        def __call__(self, *args):
            return fn(*args)

    def each(self, calls, kwargs):
        trips.append(sum(np.asarray(a).size * 8 for args in calls for a in args if isinstance(a, np.ndarray)))
        return [fn(*[np.array(a) if isinstance(a, np.ndarray) else a for a in args]) for args in calls]

    setattr(StandIn, BATCH_METHOD, each)
    cases = batch_cases() if batched else sampler_cases()
    for case in big(cases):
        case.draw(StandIn(), np.random.default_rng(0), case.n)
    assert len(trips) > 10 and max(trips) <= 512 << 20, (len(trips), max(trips) >> 20)


def test_power_from_fresh_draws_is_a_lower_bound_of_the_exact_power():
    """The power report's bound from a mutant's fresh draws (Clopper-Pearson per tail set) stays below the exact
    power of the same wrong law, and is near 0 for draws of the exact law itself."""
    cases = sampler_cases()
    law_case, _ = big(cases)
    budget = L.ALPHA_CELL / len(cases)
    p, q = R.keyed_pair()
    rng = np.random.default_rng(11)
    for family, m in (("draft", 22000), ("target", 31000), ("residual", 30)):
        wrong, _ = R.truncated_law(family, m, p, q)
        cdf = np.cumsum(wrong)
        draws = np.minimum(np.searchsorted(cdf, rng.random(2 * law_case.n) * cdf[-1], side="right"), len(p) - 1)
        bound = law_case.power_from_outcomes(budget, draws, 1e-4)
        exact = law_case.power(budget, wrong)
        assert bound <= exact + 1e-12, (family, m, bound, exact)
        if exact > 1 - 1e-9:
            assert bound > 0.99, (family, m, bound)
    cdf = np.cumsum(p)
    exact_draws = np.minimum(np.searchsorted(cdf, rng.random(2 * law_case.n) * cdf[-1], side="right"), len(p) - 1)
    assert law_case.power_from_outcomes(budget, exact_draws, 1e-4) < 1e-3


def test_impossible_outcomes_in_fresh_draws_bound_the_power():
    """A mutant whose fresh draws hold outcomes of probability 0 (a token the residual never gives, after a rejection)
    is caught whenever one such outcome is among the case's n: the bound is 1 - (1 - rho)^n."""
    cases = sampler_cases()
    _, coupled = big(cases)
    p, q = R.keyed_pair()
    zero = int(np.flatnonzero(p <= q)[0])
    draws = np.full(2 * coupled.n, R.ACCEPTED)
    draws[::50] = zero  # 2 % impossible
    bound = coupled.power_from_outcomes(L.ALPHA_CELL / len(cases), draws, 1e-4)
    assert bound > 1 - 1e-9
