"""Audit `catalog` (`make audit catalog`): every wrong implementation of both labs' catalogs refused by the hidden
check of the property it breaks, the checks called directly, as the test cells call them, under a grading run's key.

What it guarantees is what the committed power reports (autograder/audit/mutants/<lab>_power.json) bound in
probability: here each mutant meets the checks once, on the seeds a grading run would draw under a fixed key.
Each takes seconds to a minute (a mutant that is exact on most cases runs them in full), so the whole catalog is
an audit, not `make test`: its report is stale as soon as a lab's checks, catalog or solution changes, and
`make test` then fails until it is run again. `make test` keeps the mutants of the newest checks (Lab 1's
pairings of rows, tests/autograder/checks/test_lab1.py; Lab 2's knob mutants, test_lab2.py).

With them, Lab 1's design figures, which hold for the checks as written and cost tens of seconds to re-derive:
issue 14's eps targets met at the smallest n of each targeted case, the timed output check's power on
every pair the speed test can draw, and issue 53's 32,000-token cases (each cut sampler refused, the class power
over every cut, the sizes the smallest round ones at the target, the false failure by simulation).

Each mutant is recorded as a student whose refused cell scored 0, as expected. How a Lab 1 mutant meets its part's
checks is tests/autograder/checks/test_lab1.py's (`refusals`); Lab 2's table of which check refuses which mutant,
and how each check is called, is test_lab2.py's (`CAUGHT_BY`, `run_check`): both are inputs of this audit.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from autograder.audit.mutants.lab1 import MUTANTS as LAB1_MUTANTS
from autograder.checks import lab1 as L1
L = L1  # the design tests below name the lab L, as test_lab1.py does
from autograder.checks import hidden, lab1_ranks as R
from autograder.checks import stats as S
from autograder.checks.lab1_cases import BIG, N_BIG, batch_cases, sampler_cases
from autograder.checks.stats import ExactnessFailure
from autograder.audit.mutants import namespace
from speclab import speedtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autograder" / "checks"))
import test_lab1 as T1  # noqa: E402 - how a Lab 1 mutant meets its part's checks
import test_lab2 as T2  # noqa: E402 - Lab 2's table of refusing checks, and how each is called
import test_lab1_ranks as RK  # noqa: E402 - the 32,000-token cases' key and their rank cases (`RK.big`)



@pytest.mark.parametrize("m", LAB1_MUTANTS, ids=lambda m: m.name)
def test_every_lab1_mutant_fails_a_check_of_its_part(m, audit_grades):
    """Each Lab 1 mutant fails one of its part's hidden checks (the timed cell aside: its power is the
    timing_agreement audit's), and the message describes the property without showing code. A mutant keyed to
    the fixed pairs is caught because the checks run under a key."""
    failed = T1.refusals(m)
    audit_grades.student(f"lab1 {m.name}", {g: 0.0 for g in failed} or {"none": 1.0},
                         {g: 0.0 for g in failed} or {"none": 0.0})
    assert failed, m.name


@pytest.mark.parametrize("name", list(T2.CAUGHT_BY))
def test_every_lab2_mutant_fails_its_check(name, audit_grades):
    """Each Lab 2 mutant fails every check CAUGHT_BY names for it (the timed check aside: the lab2_timing
    audit times it); any exception counts, as it costs the cell's points under nbgrader."""
    ns = T2.namespace(name)
    refused = {}
    for check in [c for c in T2.CAUGHT_BY[name] if c != "speedup"]:
        with pytest.raises(Exception) as err:
            T2.run_check(check, ns)
        refused[check] = 0.0
        print(f"{name} fails {check}: {type(err.value).__name__}: {str(err.value)[:160]}")
    audit_grades.student(f"lab2 {name}", refused, {c: 0.0 for c in refused})


def test_power_is_recomputed_for_one_mutant():
    """The power computation itself (python -m autograder.audit.power), on a Lab 1 sampler mutant with few fresh
    draws (a weaker lower bound than the committed report's)."""
    from autograder.audit.power import lab_power

    report = lab_power("lab1", draws_scale=3, only=["sampler_drafts_argmax"])
    (m,) = report["mutants"]
    assert m["detection"] >= 0.999 and m["via"].startswith("test_sampler_exactness")


# ------------------------------------------------------------------ Lab 1's design figures
def _targeted(cell_name: str, group: str):
    cell = next(c for c in L.CELLS if c.grade_id == cell_name)
    cases = cell.cases()
    names = L.TARGETED[group]
    coupling = group.endswith("coupling")  # the coupling cases of a cell, or its law cases
    picked = [c for c in cases if c.name.startswith(L.COUPLING) == coupling
              and any(f"'{n}'" in c.name or (n == "different" and "its own law" in c.name)
                      or c.name.endswith(f"k = {n}") for n in names)]
    assert len(picked) == len(names), [c.name for c in picked]
    return picked, L.ALPHA_CELL / len(cases)


@pytest.mark.parametrize(("cell", "group"), [("test_sampler_exactness", "sampler"), ("test_batch_exactness", "batch"),
                                             ("test_block_exactness", "block"),
                                             ("test_sampler_exactness", "sampler coupling"),
                                             ("test_batch_exactness", "batch coupling")])
def test_eps_targets_hold_with_the_smallest_n(cell, group):
    """Issue 14's targets: eps <= target at the chosen n; 3 % fewer draws would miss it (n is the smallest, to 3 %)."""
    cases, alpha = _targeted(cell, group)
    for case in cases:
        assert case.eps == L.EPS_TARGET[group], case.name  # early passes designed for the target
        assert S.case_eps(case, alpha) <= L.EPS_TARGET[group], case.name
        fewer = int(case.n * 0.97)
        looks = S.early_passes(fewer, case.eps)
        assert S.eps_at_power(fewer, S.threshold(case.law, fewer, alpha), looks=looks) > L.EPS_TARGET[group], case.name


def test_the_timed_output_check_has_its_power_on_every_drawn_pair_and_catches_mapped_answers():
    """The figures of SPEED_OUTPUT_EPS and _timed_output_checker.

    False failures: SPEED_OUTPUT_ALPHA = 1e-4 per call (McDiarmid), at most 23 calls: <= 0.0023.
    Power: tau = E[T] + sqrt(ln(1e4) / (2 n)) and E[T] <= sqrt(V - 1) / (2 sqrt(n)) for every law over V = 4
    tokens, so tau <= 0.01347 at n = 50,000 and every law at TV >= 0.0204 from the call's p is caught with
    probability >= 0.999 (stats.eps_at_power at that tau, exact binomial tails), on every pair of the family.
    Mapped answers: a sampler holding draws of the first pair p0 can output at best a function of each token,
    law sigma_# p0 for one of the 4^4 = 256 maps sigma; for independent (p0, p) of the family the chance that
    some map lands within 0.0204 of p is about 0.46 % (Monte Carlo, 100,000 pairs; Clopper-Pearson upper end
    < 0.6 % at level 1 - 1e-6, scipy.stats.beta): such a sampler passes a timed call with probability < 0.7 %
    and its >= 7 timed calls, on independent pairs, about (0.007)^7 < 1e-14."""
    import itertools

    n, vocab = speedtest.BATCH_ROWS, speedtest.BATCH_VOCAB
    tau_max = np.sqrt(vocab - 1) / (2 * np.sqrt(n)) + np.sqrt(np.log(1 / L.SPEED_OUTPUT_ALPHA) / (2 * n))
    assert tau_max < 0.01348
    assert S.eps_at_power(n, tau_max) <= L.SPEED_OUTPUT_EPS
    assert 23 * L.SPEED_OUTPUT_ALPHA <= 0.0023 + 1e-12
    gen = np.random.default_rng(1)
    for _ in range(20):  # the bound holds on drawn pairs, the uniform law (the largest E[T]) included
        p, q = speedtest.batch_pair(gen)
        assert S.threshold(L.exact_law(p, q), n, L.SPEED_OUTPUT_ALPHA) <= tau_max
    assert S.expected_tv(np.full(vocab, 1 / vocab), n) <= np.sqrt(vocab - 1) / (2 * np.sqrt(n))

    maps = np.array(list(itertools.product(range(vocab), repeat=vocab)))  # sigma[i]: where token i goes
    push = np.zeros((vocab, len(maps), vocab))  # push[i, m, j] = 1 when map m sends token i to j
    push[np.arange(vocab)[:, None], np.arange(len(maps))[None], maps.T] = 1
    trials = 100_000
    first, fresh = zip(*(speedtest.batch_pair(gen) for _ in range(trials)))
    mapped = (np.array(first) @ push.reshape(vocab, -1)).reshape(trials, len(maps), vocab)  # every sigma_# p0
    near = 0.5 * np.abs(mapped - np.array(fresh)[:, None]).sum(-1).min(1) < L.SPEED_OUTPUT_EPS
    hits = int(near.sum())
    upper = st.beta.ppf(1 - 1e-6, hits + 1, trials - hits)
    assert upper < 0.006, (hits, upper)
    assert (upper + (1 - S.POWER)) ** speedtest.LOOKS[0] < 1e-14


# ------------------------------------------------------------------ Lab 1's 32,000-token cases (issue 53)
# The cut samplers refused by the rank cases under a key, and the design of those cases: the class power over
# every cut, the sizes as the smallest round ones at the target, and the stated false failure by simulation.
# tests/autograder/checks/test_lab1_ranks.py keeps the cases' arithmetic and the reference passing them.
CUT_SAMPLERS = ["sampler_residual_top_entries", "sampler_draft_top_entries", "sampler_threshold",
                "sampler_top_k_before_test", "batch_residual_top_entries", "batch_threshold"]

def test_false_failure_by_simulation_at_a_large_budget():
    """At a budget of 0.2 the tests reject samples drawn from the exact law no more often than false_failure says
    (which is <= the budget): 2000 simulated hidden tests, counts drawn from the law directly."""
    p, _ = R.big_pair()
    cdf = np.cumsum(p)
    case = R.law_case("law", 2000, lambda fn, rng, n: np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1],
                                                                                side="right"), len(p) - 1))
    stated = case.false_failure(0.2)
    assert 0.02 < stated <= 0.2
    rng = np.random.default_rng(5)
    fails = 0
    for _ in range(2000):
        try:
            case.check(None, rng, 0.2)
        except ExactnessFailure:
            fails += 1
    # the rate is <= stated; 2000 runs: 4 standard deviations above it (a false failure of this test: ~3e-5)
    assert fails / 2000 <= stated + 4 * np.sqrt(stated * (1 - stated) / 2000), (fails, stated)


def test_class_power_meets_the_target_and_is_the_least_over_the_members():
    """Every family of cut samplers at total variation >= CLASS_EPS is caught with probability >= 0.999 by each
    sampler's 32,000-token cases; the least power is that of its member (checked directly)."""
    cases = sampler_cases()
    law, coupled = RK.big(cases)
    budget = L.ALPHA_CELL / len(cases)
    table = R.class_power(law, coupled, budget)
    p, q = R.keyed_pair()
    for family, entry in table.items():
        assert entry["members"] > 100 and entry["least_power"] >= 0.999, (family, entry)
        m = entry["at"]["m"]
        output, coupling = R.truncated_law(family, m, p, q)
        assert 0.5 * np.abs(output - p).sum() >= R.CLASS_EPS
        direct = max(law.power(budget, output), coupled.power(budget, coupling) if family == "residual" else 0.0)
        assert direct == pytest.approx(entry["least_power"], abs=1e-9)


@pytest.mark.parametrize("name", CUT_SAMPLERS)
def test_each_cut_sampler_fails_a_32000_token_case_under_a_key(name):
    """Issue 53: the catalog's samplers that cut a distribution short are refused by the new cases, called as the
    cells call them (run_case at the cell's budget), under a key; each is exact on the small pairs."""
    m = next(m for m in LAB1_MUTANTS if m.name == name)
    fn = getattr(namespace("lab1", m), m.replaces)
    with hidden.keyed(RK.TEST_KEY):
        cases = batch_cases() if m.part == 5 else sampler_cases()
        failure = None
        for case in RK.big(cases):  # the law case, then the coupling case: the first failure ends the cell
            try:
                L.run_case(case, fn, np.random.default_rng(2026), L.ALPHA_CELL / len(cases))
            except ExactnessFailure as err:
                failure = str(err)
                break
    assert failure and BIG in failure and ("ranked beyond" in failure or "came after a rejection" in failure), \
        failure


def test_sizes_are_the_smallest_round_ones_at_the_target():
    """N_BIG are the smallest multiples of 1000 at which the class power reaches 0.999 (a design, not a guess):
    1000 fewer outcomes in the law case (for the draft family), or in the coupling case (for the residual family),
    miss it."""
    cases = sampler_cases()
    law, coupled = RK.big(cases)
    budget = L.ALPHA_CELL / len(cases)

    def least(n_law: int, n_coupled: int) -> float:
        a = R.RankCase(law.name, law.law, n_law, law.draw, law.tails)
        b = R.RankCase(coupled.name, coupled.law, n_coupled, coupled.draw, coupled.tails)
        return min(f["least_power"] for f in R.class_power(a, b, budget).values())

    assert least(N_BIG["law"], N_BIG["coupling"]) >= 0.999
    assert least(N_BIG["law"] - 1000, N_BIG["coupling"]) < 0.999
    assert least(N_BIG["law"], N_BIG["coupling"] - 1000) < 0.999
