"""The Lab 1 grading machinery itself: statistics, exact laws, catalog, notebooks in sync.

Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from scipy import stats as st
from traitlets.config.loader import PyFileConfigLoader

from speclab import speedtest
from autograder.authoring import labs, reference as reference_solution
from autograder.checks import hidden, lab1 as L, timing
from autograder.checks import stats as S
from autograder.checks.stats import ExactnessCase, ExactnessFailure, check_case
from autograder.audit.mutants import make_submission, namespace, strip_markers
from autograder.audit.mutants.lab1 import MUTANTS

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "solutions" / "lab1" / "lab1.ipynb"
RELEASE = ROOT / "labs" / "lab1" / "lab1.ipynb"
TEST_KEY = bytes(range(32))  # a grading run's key (autograder/checks/hidden.py), fixed so a failure reproduces


def _case(law, n, sample_law=None):
    law = np.asarray(law)
    draw_law = law if sample_law is None else np.asarray(sample_law)
    return ExactnessCase("toy", law, n, lambda fn, rng, m: rng.choice(len(draw_law), m, p=draw_law))


# ----------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("n", [1, 2, 7, 60, 1000])
def test_expected_tv_is_exact(n):
    """de Moivre's formula against a direct sum over every count, for each outcome's binomial."""
    law = np.array([0.0, 0.05, 0.15, 0.3, 0.5])
    direct = 0.0
    for prob in law:
        counts = np.arange(n + 1)
        direct += 0.5 * np.sum(np.abs(counts / n - prob) * st.binom.pmf(counts, n, prob))
    assert S.expected_tv(law, n) == pytest.approx(direct, rel=1e-9, abs=1e-15)


def test_false_failure_bound_is_the_budget_and_holds_by_simulation():
    case = _case([0.1, 0.2, 0.3, 0.4], 400)
    assert S.case_false_failure_bound(case, 1e-6) == pytest.approx(1e-6)
    # a loose budget, so that a simulation can see it: the rate of false failures stays below it
    rng = np.random.default_rng(1)
    reps, alpha = 4000, 0.05
    tau = S.threshold(case.law, case.n, alpha)
    counts = rng.multinomial(case.n, case.law, size=reps)
    tv = 0.5 * np.abs(counts / case.n - case.law).sum(axis=1)
    rate = np.mean(tv >= tau)
    assert rate <= alpha  # McDiarmid is conservative: the true rate is far below alpha (0 here)


@pytest.mark.parametrize(("n", "alpha"), [(300, 1e-3), (5000, 1e-7), (20011, 1e-6)])
def test_worst_case_power_branch_and_bound_equals_the_full_minimum(n, alpha):
    tau = S.threshold(np.array([0.1, 0.2, 0.3, 0.4]), n, alpha)
    for delta in (tau + 0.5 / np.sqrt(n), tau + 1.5 / np.sqrt(n), tau + 3 / np.sqrt(n)):
        j = np.arange(np.ceil(n * tau), n + 1)
        a = np.maximum((j - 1) / n - tau - 1e-12, 0.0)
        keep = a <= 1 - delta
        full = float(np.min(st.binom.sf(j[keep] - 1, n, a[keep] + delta)))
        assert S.worst_case_power(n, tau, delta) == pytest.approx(full, rel=1e-9)
        with_target = S.worst_case_power(n, tau, delta, target=0.999)
        assert (with_target >= 0.999) == (full >= 0.999)


def test_worst_case_power_holds_against_adversarial_laws_by_simulation():
    """Laws at TV exactly eps, moving mass between the halves that are hardest to tell apart: caught >= 0.999."""
    law = np.array([0.1, 0.2, 0.3, 0.4])
    n, alpha = 2000, 1e-3
    eps = S.eps_at_power(n, S.threshold(law, n, alpha))
    tau = S.threshold(law, n, alpha)
    rng = np.random.default_rng(2)
    for plus in ([0, 3], [1, 2], [3], [2]):  # the set A = {r > p}: P(A) = 0.5, 0.5, 0.4, 0.3
        minus = [i for i in range(4) if i not in plus]
        r = law.copy()
        r[plus] += eps * law[plus] / law[plus].sum()
        r[minus] -= eps * law[minus] / law[minus].sum()
        assert 0.5 * np.abs(r - law).sum() == pytest.approx(eps)
        counts = rng.multinomial(n, r, size=20000)
        caught = np.mean(0.5 * np.abs(counts / n - law).sum(axis=1) >= tau)
        assert caught >= 0.998, (plus, caught)  # >= 0.999 in truth; 0.998 leaves 3 sd of simulation noise


def test_eps_is_the_smallest_delta_at_the_power():
    n, tau = 10000, S.threshold(np.array([0.5, 0.5]), 10000, 1e-7)
    eps = S.eps_at_power(n, tau)
    assert S.worst_case_power(n, tau, eps) >= S.POWER > S.worst_case_power(n, tau, eps - 2e-5)


def test_power_of_a_far_law_is_near_one_and_of_the_true_law_is_tiny():
    case = _case([0.1, 0.2, 0.3, 0.4], 5000)
    assert S.power_lower_bound(case, 1e-6, np.array([0.2, 0.2, 0.2, 0.4])) > 1 - 1e-12
    assert S.power_lower_bound(case, 1e-6, case.law) <= 1e-6


def test_power_from_outcomes_is_a_lower_bound():
    """Against the rejection rate simulated directly (4000 hidden tests), with 3 sd of simulation noise."""
    case = _case([0.1, 0.2, 0.3, 0.4], 3000)
    wrong = np.array([0.17, 0.2, 0.23, 0.4])  # TV 0.07, below eps (about 0.09) at this n
    rng = np.random.default_rng(3)
    bound = S.power_from_outcomes(case, 1e-6, rng.choice(4, 60000, p=wrong))
    tau = S.threshold(case.law, case.n, 1e-6)
    counts = rng.multinomial(case.n, wrong, size=4000)
    rate = np.mean(0.5 * np.abs(counts / case.n - case.law).sum(axis=1) >= tau)
    assert 0.05 < bound <= rate + 3 * np.sqrt(rate * (1 - rate) / 4000) + 1e-3


# ----------------------------------------------------------------------------- early passes (sequential cases)
def _sequential_outcomes(law, sample_law, n, eps, reps, rng):
    """Simulate check_case's decisions on `reps` hidden tests: 'pass early', 'pass' or 'fail' (looks of stats)."""
    law, sample_law = np.asarray(law, float), np.asarray(sample_law, float)
    looks = S.early_passes(n, eps)
    counts = np.zeros((reps, len(law)))
    decided = np.full(reps, "", dtype=object)
    done = 0
    for m, t in looks:
        counts += rng.multinomial(m - done, sample_law, size=reps)
        done = m
        tv = 0.5 * np.abs(counts / m - law).sum(axis=1)
        decided[(decided == "") & (tv < t)] = "pass early"
    counts += rng.multinomial(n - done, sample_law, size=reps)
    tv = 0.5 * np.abs(counts / n - law).sum(axis=1)
    tau = S.threshold(law, n, 1e-6)
    decided[(decided == "") & (tv >= tau)] = "fail"
    decided[decided == ""] = "pass"
    return decided


def test_early_looks_leave_a_stated_miss_for_laws_at_the_design_distance(monkeypatch):
    """Hoeffding's bound: a law at TV = eps passes early with probability <= EARLY_MISS, for the sets A that are
    hardest to tell apart. EARLY_MISS is loosened to 0.05 here so that 20,000 simulated tests can see a breach."""
    monkeypatch.setattr(S, "EARLY_MISS", 0.05)
    law, n, eps = np.array([0.1, 0.2, 0.3, 0.4]), 4000, 0.06
    rng = np.random.default_rng(5)
    assert len(S.early_passes(n, eps)) == len(S.LOOKS)
    for plus in ([0, 3], [1, 2], [3], [2]):
        minus = [i for i in range(4) if i not in plus]
        r = law.copy()
        r[plus] += eps * law[plus] / law[plus].sum()
        r[minus] -= eps * law[minus] / law[minus].sum()
        early = np.mean(_sequential_outcomes(law, r, n, eps, 20000, rng) == "pass early")
        assert early <= 0.05, (plus, early)
        assert early <= S.early_miss(S.early_passes(n, eps), eps)


def test_correct_samplers_pass_early_and_wrong_ones_draw_everything_and_fail():
    law = np.array([0.1, 0.2, 0.3, 0.4])
    case = ExactnessCase("toy", law, 60000, lambda fn, rng, m: rng.choice(4, m, p=law), eps=0.02)
    used = [check_case(case, None, np.random.default_rng(seed), 1e-6) for seed in range(10)]
    assert all(u < case.n for u in used), used  # a correct sample is clearly within 0.02 well before 60000 draws
    wrong = ExactnessCase("toy", law, 60000, lambda fn, rng, m: rng.choice(4, m, p=[0.13, 0.2, 0.27, 0.4]), eps=0.02)
    with pytest.raises(ExactnessFailure, match="60000 samples"):
        check_case(wrong, None, np.random.default_rng(0), 1e-6)
    one_look = ExactnessCase("toy", law, 60000, lambda fn, rng, m: rng.choice(4, m, p=law))
    assert check_case(one_look, None, np.random.default_rng(0), 1e-6) == 60000  # no eps: one look at n
    impossible = ExactnessCase("toy", np.array([0.0, 0.5, 0.5]), 60000,
                               lambda fn, rng, m: rng.choice(3, m, p=[0.001, 0.499, 0.5]), eps=0.02)
    with pytest.raises(ExactnessFailure, match="impossible"):  # an impossible outcome fails at the first look
        check_case(impossible, None, np.random.default_rng(0), 1e-6)


def test_sequential_eps_counts_the_early_looks():
    """eps of a sequential case: the last look's worst-case power minus the early looks' Hoeffding bounds
    reaches 0.999 at eps and not 2e-5 below; it is larger than the same n's eps with one look."""
    law, n, alpha = np.array([0.1, 0.2, 0.3, 0.4]), 60000, 1e-6
    case = ExactnessCase("toy", law, n, lambda fn, rng, m: rng.choice(4, m, p=law), eps=0.02)
    tau, looks = S.threshold(law, n, alpha), S.early_passes(n, 0.02)
    eps = S.case_eps(case, alpha)
    assert S.worst_case_power(n, tau, eps) - S.early_miss(looks, eps) >= S.POWER
    assert S.worst_case_power(n, tau, eps - 2e-5) - S.early_miss(looks, eps - 2e-5) < S.POWER
    assert eps > S.eps_at_power(n, tau)


def test_sequential_power_lower_bound_holds_by_simulation():
    """Against the whole sequential procedure simulated (20,000 hidden tests), for a law just below eps."""
    law, n = np.array([0.1, 0.2, 0.3, 0.4]), 6000
    wrong = np.array([0.145, 0.2, 0.255, 0.4])  # TV 0.045
    case = ExactnessCase("toy", law, n, lambda fn, rng, m: rng.choice(4, m, p=law), eps=0.06)
    bound = S.power_lower_bound(case, 1e-6, wrong)
    rate = np.mean(_sequential_outcomes(law, wrong, n, 0.06, 20000, np.random.default_rng(6)) == "fail")
    assert 0.05 < bound <= rate + 3 * np.sqrt(rate * (1 - rate) / 20000) + 1e-3, (bound, rate)


def test_check_case_reports_tv_and_worst_token():
    wrong = _case([0.1, 0.2, 0.3, 0.4], 5000, sample_law=[0.25, 0.2, 0.15, 0.4])
    with pytest.raises(ExactnessFailure, match=r"total variation .* is 0\.1\d+.*stays below.*token [02]: .* expected"):
        check_case(wrong, None, np.random.default_rng(0), 1e-6)
    check_case(_case([0.1, 0.2, 0.3, 0.4], 5000), None, np.random.default_rng(0), 1e-6)
    impossible = _case([0.0, 0.5, 0.5], 100, sample_law=[0.01, 0.49, 0.5])
    with pytest.raises(ExactnessFailure, match="impossible for a correct implementation"):
        check_case(impossible, None, np.random.default_rng(0), 1e-6)


# Issue 14's eps targets at the smallest n, per targeted case: the `catalog` audit (tests/audit/test_catalog.py).


def test_regimes_of_issue_14_are_covered():
    pairs = L.pairs()
    alpha = {name: np.minimum(p, q).sum() for name, (p, q) in pairs.items()}
    assert alpha["high acceptance, residual over 15 tokens"] >= 0.95
    p, q = pairs["high acceptance, residual over 15 tokens"]
    assert np.sum(p > q) == 15
    assert alpha["low acceptance, zeros in p and q"] <= 0.15 and alpha["disjoint supports"] == 0
    p, q = pairs["low acceptance, zeros in p and q"]
    assert (p == 0).any() and (q == 0).any()
    p, q = pairs["temperature 0.7, top-3 p, top-p 0.9 q"]
    assert (p > 0).sum() == 3 and 3 < (q > 0).sum() < len(q)
    assert max(len(p) for p, _ in pairs.values()) >= 1000
    assert sorted(L.N_BLOCK) == [1, 3, 5]


# ----------------------------------------------------------------------------- exact laws
@pytest.mark.parametrize("name", L.COUPLING_PAIRS)
def test_coupling_law_has_the_right_marginals_and_keeps_exactly_alpha(name):
    """The coupling cases' law: drafts follow q, emitted tokens follow p, and P(emitted = draft) = alpha."""
    p, q = L.pairs()[name]
    law = L.coupling_law(p, q).reshape(len(p), len(p))
    assert np.allclose(law.sum(axis=1), q, atol=1e-12) and np.allclose(law.sum(axis=0), p, atol=1e-12)
    assert np.trace(law) == pytest.approx(np.minimum(p, q).sum(), abs=1e-12)


def test_coupling_law_by_hand():
    # p = [.1, .2, .3, .4], q = [.4, .3, .2, .1]: a(0) = 1/4, a(1) = 2/3, a(2) = a(3) = 1; residual [0, 0, 1/4, 3/4]
    law = L.coupling_law(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])).reshape(4, 4)
    assert law[0] == pytest.approx([0.1, 0, 0.3 * 0.25, 0.3 * 0.75])
    assert law[1] == pytest.approx([0, 0.2, 0.1 * 0.25, 0.1 * 0.75])
    assert law[2] == pytest.approx([0, 0, 0.2, 0]) and law[3] == pytest.approx([0, 0, 0, 0.1])


def test_block_law_k1_hand_worked():
    # start row: p = [.5, .3, .2], q = [.2, .5, .3]. Draft 0 (.2) always accepted; draft 1 (.5)
    # accepted w.p. .6; draft 2 (.3) w.p. 2/3; rejections (.2 + .1) resample the residual = token 0.
    law = dict(zip(L.block_outcomes(3, 1), L.block_law(L.toy_bigram(), 1)))
    want = {(0,): 0.3, (1,): 0, (2,): 0, (0, 0): .1, (0, 1): .06, (0, 2): .04, (1, 0): .03, (1, 1): .03,
            (1, 2): .24, (2, 0): .06, (2, 1): .12, (2, 2): .02}
    assert law == pytest.approx(want)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_block_law_first_token_follows_target(k):
    """Exactness: whatever k, the first emitted token follows the target's start row."""
    model = L.toy_bigram()
    first = np.zeros(3)
    for seq, prob in zip(L.block_outcomes(3, k), L.block_law(model, k)):
        first[seq[0]] += prob
    assert first == pytest.approx(model.target[model.start])


@pytest.mark.parametrize("name", list(L.pairs()))
def test_pairs_are_distributions(name):
    p, q = L.pairs()[name]
    assert p.sum() == pytest.approx(1) and q.sum() == pytest.approx(1) and (p >= 0).all() and (q >= 0).all()


def test_statistical_cells_within_false_failure_budget():
    for cell in L.CELLS:
        if cell.cases is not None:
            cases = cell.cases()
            total = sum(L.false_failure(c, L.ALPHA_CELL / len(cases)) for c in cases)
            assert total <= L.ALPHA_CELL * (1 + 1e-9), cell.grade_id  # each case gets ALPHA_CELL / cases: float rounding


# ----------------------------------------------------------------------------- the checks on the reference
@pytest.fixture(scope="module")
def reference():
    return reference_solution.load("lab1")


@pytest.mark.parametrize("cell", [c for c in L.CELLS if c.cases is None and c.grade_id != "test_batch_speed"],
                         ids=lambda c: c.grade_id)
def test_deterministic_checks_pass_reference(reference, cell):
    cell.check(*[getattr(reference, a) for a in cell.args])


# The newest checks' mutants (issue 53: rows paired at no fixed distance). The whole catalog, each mutant against
# its part's checks, is the `catalog` audit (tests/audit/test_catalog.py), whose report `make test` checks.
NEWEST = [m for m in MUTANTS if m.name in ("batch_rows_mirrored", "batch_rows_paired_at_random")]


def refusals(m) -> dict[str, str]:
    """{grade id: message} of the first of its part's hidden checks that refuses mutant m, called as the test cells
    call them (the timed cell aside), under a key, as in a grading run (autograder/checks/hidden.py); {} if none
    does. The `catalog` audit runs every mutant through it."""
    ns = namespace("lab1", m)
    for cell in [c for c in L.CELLS if c.part == m.part and c.grade_id != "test_batch_speed"]:
        try:
            with hidden.keyed(TEST_KEY):
                cell.check(*[getattr(ns, a) for a in cell.args])
        except AssertionError as err:
            assert "def " not in str(err)  # the message describes the property, it shows no code
            return {cell.grade_id: str(err)}  # one cell of its part refuses it: the cells after it need not run
        except Exception as err:  # noqa: BLE001 - a crash in a graded cell costs its points under nbgrader too
            return {cell.grade_id: f"{type(err).__name__}: {err}"}
    return {}


@pytest.mark.parametrize("m", NEWEST, ids=lambda m: m.name)
def test_every_mutant_fails_a_check_of_its_part(m):
    """Each of the newest mutants fails one of its part's hidden checks; the committed power report gives each
    one's probability of being caught."""
    assert refusals(m), m.name


# ----------------------------------------------------------------------------- catalog and notebooks
def test_catalog_covers_every_part_with_at_least_12_documented_mutants():
    assert len(MUTANTS) >= 12
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert {m.part for m in MUTANTS} == {c.part for c in L.CELLS}
    assert all(m.doc and m.source.startswith(f"def {m.replaces}(") for m in MUTANTS)


def test_mutant_is_injected_after_the_reference():
    release = nbformat.read(RELEASE, as_version=4)
    m = MUTANTS[0]
    sub = make_submission("lab1", release, m)
    text = "\n".join(c.source for c in sub.cells)
    assert "raise NotImplementedError" not in text and "### BEGIN SOLUTION" not in text
    assert text.index(f"injected mutant {m.name}") > text.index(f"def {m.replaces}(")


def test_solution_notebook_is_built_from_the_markdown_source():
    assert labs.build("lab1", check=True), "solutions/lab1/lab1.ipynb is stale: run `make labs`"


def test_solution_notebook_metadata():
    nb = nbformat.read(SOURCE, as_version=4)
    meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]
    graded = {m["grade_id"]: m["points"] for m in meta if m.get("grade")}
    assert graded == {c.grade_id: c.points for c in L.CELLS}
    assert sum(graded.values()) == 20
    assert all(m.get("locked") for c, m in zip(nb.cells, meta) if c.cell_type == "markdown")
    assert sum(bool(m.get("solution")) for m in meta) == 6  # one per part, and the optional Part 6


def test_release_has_no_solutions_or_hidden_tests():
    text = RELEASE.read_text()
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "autograder.checks", "np.maximum(p - q"):
        assert marker not in text


@pytest.mark.slow
def test_committed_labs_match_generate_assignment(nbgrader_course):
    """`nbgrader generate_assignment` of solutions/ gives the committed labs/ (volatile metadata aside)."""
    fresh = nbformat.read(nbgrader_course.generate("lab1") / "lab1.ipynb", as_version=4)
    committed = nbformat.read(RELEASE, as_version=4)

    def stable(nb):
        """Everything but the volatile parts: interpreter details, execution counts, outputs."""
        d = nbformat.from_dict(nb)
        d.metadata.pop("language_info", None)
        for cell in d.cells:
            cell.pop("execution_count", None)
            cell.pop("outputs", None)
        return d

    assert stable(fresh) == stable(committed), "labs/ is stale: run `make labs`"
    assert sorted(p.name for p in (nbgrader_course.root / "labs" / "lab1").iterdir()) == ["lab1.ipynb"]


def _config(argv):
    old = sys.argv
    sys.argv = argv
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "autograder" / "inside")).load_config()
    finally:
        sys.argv = old


@pytest.mark.parametrize(("argv", "timeout"), [(["nbgrader", "autograde", "lab1"], 120),
                                               (["nbgrader", "autograde", "--assignment=lab2"], 360),
                                               (["nbgrader", "db", "student", "list"], 360)])
def test_config_sets_per_lab_timeout_and_course_folders(argv, timeout):
    c = _config(argv)
    assert c.Execute.timeout == timeout
    assert c.CourseDirectory.source_directory == "solutions" and c.CourseDirectory.release_directory == "labs"
    assert "ExecutePreprocessor" not in c  # the key nbgrader 0.9 ignores is not relied on


def test_power_report_is_current_and_meets_target():
    """The committed power table covers this catalog at these sample sizes, all >= 0.999."""
    report = json.loads((ROOT / "autograder" / "audit" / "mutants" / "lab1_power.json").read_text())
    assert [m["name"] for m in report["mutants"]] == [m.name for m in MUTANTS]
    # a mutant just above eps needs more fresh draws than the default cap for a tight simulated bound: its
    # entry records the cap it was computed with (python -m autograder.power lab1 --only NAME --max-draws N)
    assert all(m["detection"] >= 0.999 for m in report["mutants"]), [m["name"] for m in report["mutants"]
                                                                      if m["detection"] < 0.999]
    sizes = {name: n for cell in report["cells"] for name, n in cell.get("n", {}).items()}
    assert sizes == {c.name: c.n for cell in L.CELLS if cell.cases for c in cell.cases()}
    assert all(cell["false_failure"] <= L.ALPHA_CELL * (1 + 1e-9) for cell in report["cells"])  # float rounding
    # the independence tests' own budget (autograder/checks/independence.py), stated beside it
    from autograder.checks.independence import ALPHA_LAGS

    lags = {c.grade_id: sum(case.lag_calls for case in c.cases()) * ALPHA_LAGS for c in L.CELLS if c.cases}
    assert {cell["grade_id"]: cell["lag_false_failure"] for cell in report["cells"] if "cases" in cell} == lags
    assert 0 < max(lags.values()) <= 2e-8
    from autograder.checks.independence import ALPHA_PAIRS

    pairs = {c.grade_id: sum(case.pair_tests for case in c.cases()) * ALPHA_PAIRS for c in L.CELLS if c.cases}
    assert {cell["grade_id"]: cell["pair_false_failure"] for cell in report["cells"] if "cases" in cell} == pairs
    assert pairs["test_batch_exactness"] == ALPHA_PAIRS  # one test of any two rows, in the batch cell
    rows = [row for cell in report["cells"] for row in cell.get("table", [])]
    assert len(rows) == len(sizes) and all(0 < row["eps"] < 1 for row in rows)


def test_strip_markers():
    assert strip_markers("a\n    ### BEGIN SOLUTION\nb\n    ### END SOLUTION\nc") == "a\nb\nc"


def _edge_case(cell: str, fragment: str):
    spec = next(c for c in L.CELLS if c.grade_id == cell)
    cases = spec.cases()
    (case,) = [c for c in cases if fragment in c.name and not c.name.startswith(L.COUPLING)]
    return case, L.ALPHA_CELL / len(cases)


@pytest.mark.parametrize(("mutant", "cell", "fragment"), [
    ("sampler_rare_residual_shortcut", "test_sampler_exactness", "high acceptance"),
    ("batch_accept_with_le", "test_batch_exactness", "copies of pair 'reversed'"),
])
def test_catalog_exercises_the_guarantee_near_its_edge(mutant, cell, fragment):
    """Issue 14: mutants whose exact output law is between eps and 2 eps from p on a case; caught w.p. >= 0.999."""
    case, alpha = _edge_case(cell, fragment)
    name = fragment.split("'")[1] if "'" in fragment else "high acceptance, residual over 15 tokens"
    p, q = L.pairs()[name]
    if mutant == "sampler_rare_residual_shortcut":  # accepted drafts, then the residual's mode when the residual is rare
        kept = np.minimum(p, q)
        resid = np.maximum(p - q, 0.0)
        assert resid.sum() < 0.1
        law = kept + (1 - kept.sum()) * np.eye(len(p))[np.argmax(resid)]
    else:  # acceptance min(1, 1.05 p / q), then the exact residual
        kept = q * np.minimum(1.0, 1.05 * p / q)
        law = kept + (1 - kept.sum()) * np.maximum(p - q, 0.0) / np.maximum(p - q, 0.0).sum()
    tv = 0.5 * np.abs(law - p).sum()
    eps = S.case_eps(case, alpha)
    assert eps <= tv <= 2 * eps, (tv, eps)
    assert S.power_lower_bound(case, alpha, law) >= 0.999


def _predrawing(ref):
    """A batch sampler that buys its timing: its first call (the speed test's warm-up, untimed) draws 40
    batches for that call's pair, correct draws all of them; every call returns one of them, at once."""
    stash = []

    def sampler(P, Q, rng):
        if not stash:
            stash.extend(ref.speculative_sample_batch(P, Q, rng) for _ in range(40))
        return stash.pop(0)
    return sampler


def _relabelling(ref):
    """The pre-drawer made smarter: its first call draws 40 batches under the pair it was given; every later
    call recognises that call's pair as a relabelling of the first (its tokens matched by rank of p) and maps
    its pre-drawn tokens through that relabelling, one lookup (exact when a round's pair is a permutation of
    the first, as in the speed test that drew permutations of one fixed pair)."""
    stash, first = [], []

    def sampler(P, Q, rng):
        if not stash:
            first.append(np.argsort(P[0]))
            stash.extend(ref.speculative_sample_batch(P, Q, rng) for _ in range(40))
        lookup = np.empty(P.shape[1], dtype=np.int64)
        lookup[first[0]] = np.argsort(P[0])  # the first pair's token of rank r becomes this pair's token of rank r
        return lookup[stash.pop(0)]
    return sampler


@pytest.mark.parametrize("attack", ["garbage_when_timed", "replays_one_answer", "predraws_before_the_clock",
                                    "predraws_then_relabels"])
def test_speed_check_refuses_outputs_that_skip_the_work(attack):
    """A batch sampler that spots the timed calls (50,000 rows) and returns zeros fast, returns one stored
    answer again, returns answers it drew before the clock started, or maps such answers onto the call's pair,
    loses the speed point however fast it is: each timed output is tested against its own call's pair (a fresh
    pair for each call, level 1e-4 per call) and must differ from the others. An AssertionError naming the
    rule, not a timing failure."""
    ref = reference_solution.load("lab1")
    store = {}

    def cheat(P, Q, rng):
        if attack == "garbage_when_timed":
            return np.zeros(len(P), dtype=np.int64) if len(P) == speedtest.BATCH_ROWS else ref.speculative_sample_batch(P, Q, rng)
        if len(P) not in store:
            store[len(P)] = ref.speculative_sample_batch(P, Q, rng)
        return store[len(P)]

    sampler = {"predraws_before_the_clock": _predrawing(ref), "predraws_then_relabels": _relabelling(ref)}.get(attack, cheat)
    with pytest.raises(AssertionError, match="timed call") as err:
        L.check_batch_speed(sampler)
    assert not isinstance(err.value, timing.TimingFailure) and err.value.rule is L.R_BATCH_SPEED


def test_the_reference_keeps_the_speed_point():
    ref = reference_solution.load("lab1")
    result = L.speed_test(ref.speculative_sample_batch)
    print(f"reference batch speed: {result.summary('speculative_sample_batch')}")
    assert result.verdict != "fail"
    L.check_batch_speed(ref.speculative_sample_batch)


def test_speed_test_pairs_come_from_the_grading_runs_key(monkeypatch):
    """Under a key, lab1.speed_test gives every round (the warm-up's too) the next `speedtest.batch_pair` of the
    generator seeded by hidden.seed("test_batch_speed pairs", 4), never the sampler's rng; the batch call and
    the output check get the same pair; all differ, and from those drawn without a key."""
    ref = reference_solution.load("lab1")
    real_checker = L._timed_output_checker

    def run() -> tuple[list, list]:
        given, handed = [], []

        def sampler(P, Q, rng):
            given.append((P[0].copy(), Q[0].copy()))
            return ref.speculative_sample_batch(P, Q, rng)

        def checker(rows):
            check = real_checker(rows)
            return lambda out, p, q: (handed.append((p, q)), check(out, p, q))

        monkeypatch.setattr(L, "_timed_output_checker", checker)
        L.speed_test(sampler)
        return given, handed

    with hidden.keyed(TEST_KEY):
        given, handed = run()
        gen = np.random.default_rng(hidden.seed("test_batch_speed pairs", 4))
    assert len(given) == len(handed) >= speedtest.LOOKS[0] + 1
    for (p, q), (hp, hq) in zip(given, handed):
        want_p, want_q = speedtest.batch_pair(gen)
        assert np.array_equal(p, want_p) and np.array_equal(q, want_q) and np.array_equal(p, hp) and np.array_equal(q, hq)
    assert len({p.tobytes() for p, _ in given}) == len(given)
    unkeyed, _ = run()
    assert not {p.tobytes() for p, _ in given} & {p.tobytes() for p, _ in unkeyed}


@pytest.mark.parametrize("make", [_predrawing, _relabelling])
def test_predrawn_answers_would_pass_if_every_round_got_the_first_pair(make, monkeypatch):
    """Both pre-drawers fail above only because each round's pair is new: if every round got the warm-up's
    pair, their answers (correct, distinct draws of that pair) would keep the point."""
    ref = reference_solution.load("lab1")
    first = speedtest.batch_pair(np.random.default_rng(0))
    monkeypatch.setattr(speedtest, "batch_pair", lambda gen: (first[0].copy(), first[1].copy()))
    L.check_batch_speed(make(ref))


# The timed output check's power on every drawn pair: the `catalog` audit (tests/audit/test_catalog.py).
