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

from autograder import labs, reference as reference_solution
from autograder.checks import lab1 as L
from autograder.checks.stats import (ExactnessCase, ExactnessFailure, acceptance_region, case_false_failure_bound,
                                     check_case, power_lower_bound)
from autograder.mutants import make_submission, namespace, strip_markers
from autograder.mutants.lab1 import MUTANTS

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "solutions" / "lab1" / "lab1.ipynb"
RELEASE = ROOT / "labs" / "lab1" / "lab1.ipynb"


# ----------------------------------------------------------------------------- statistics
def test_acceptance_region_hand_worked():
    # Binomial(10, 1/2): P(N = 0) = P(N = 10) = 1/1024 < 0.001 <= P(N <= 1) = 11/1024,
    # so with 0.001 per side the accepted counts are 1..9 and the exact tail is 2/1024.
    r = acceptance_region(np.array([0.5, 0.0, 1.0]), 10, alpha_each=0.002)
    assert r.lo.tolist() == [1, 0, 10] and r.hi.tolist() == [9, 0, 10]
    assert r.tail[0] == pytest.approx(2 / 1024) and r.tail[1] == 0 and r.tail[2] == 0


@pytest.mark.parametrize("n", [50, 1000, 20000])
@pytest.mark.parametrize("prob", [1e-4, 0.03, 0.5, 0.97])
def test_acceptance_region_tails_within_budget(n, prob):
    alpha = 1e-7
    r = acceptance_region(np.array([prob]), n, alpha)
    assert r.tail[0] <= alpha
    # one more count on either side would be accepted wrongly often: the region is the tightest one
    wider_tail = st.binom.cdf(r.lo[0], n, prob) + st.binom.sf(r.hi[0] - 1, n, prob)
    assert wider_tail > alpha / 2 or r.lo[0] == 0


@pytest.mark.parametrize("n", [1, 7, 1000, 40000])
@pytest.mark.parametrize("alpha", [1e-7, 0.01, 0.3])
def test_acceptance_region_matches_scipy_stats_binom(n, alpha):
    prob = np.array([0.0, 1e-5, 0.003, 0.2, 0.5, 0.93, 1.0])
    r = acceptance_region(prob, n, alpha)
    inside = (prob > 0) & (prob < 1)
    assert (r.lo[inside] == st.binom.ppf(alpha / 2, n, prob[inside])).all()
    assert (r.hi[inside] == st.binom.isf(alpha / 2, n, prob[inside])).all()


def _case(law, n, sample_law=None):
    law = np.asarray(law)
    draw_law = law if sample_law is None else np.asarray(sample_law)
    return ExactnessCase("toy", law, n, lambda fn, rng, m: rng.choice(len(draw_law), m, p=draw_law))


def test_false_failure_bound_is_sum_of_tails_and_below_budget():
    case = _case([0.1, 0.2, 0.3, 0.4], 5000)
    bound = case_false_failure_bound(case, 1e-6)
    assert 0 < bound <= 1e-6
    # four events (the four tokens, nothing pooled), each with budget 1e-6 / 4
    assert bound == pytest.approx(sum(acceptance_region(case.law, 5000, 1e-6 / 4).tail))


def test_power_of_a_far_law_is_near_one_and_of_the_true_law_is_tiny():
    case = _case([0.1, 0.2, 0.3, 0.4], 5000)
    assert power_lower_bound(case, 1e-6, np.array([0.2, 0.2, 0.2, 0.4])) > 1 - 1e-12
    assert power_lower_bound(case, 1e-6, case.law) <= 1e-6


def test_check_case_reports_tv_and_worst_token():
    wrong = _case([0.1, 0.2, 0.3, 0.4], 5000, sample_law=[0.25, 0.2, 0.15, 0.4])
    with pytest.raises(ExactnessFailure, match=r"total variation .* is 0\.1\d+.*token [02]"):
        check_case(wrong, None, np.random.default_rng(0), 1e-6)
    check_case(_case([0.1, 0.2, 0.3, 0.4], 5000), None, np.random.default_rng(0), 1e-6)


# ----------------------------------------------------------------------------- exact laws
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
            total = sum(case_false_failure_bound(c, L.ALPHA_CELL / len(cases)) for c in cases)
            assert total <= L.ALPHA_CELL, cell.grade_id


# ----------------------------------------------------------------------------- the checks on the reference
@pytest.fixture(scope="module")
def reference():
    return reference_solution.load("lab1")


@pytest.mark.parametrize("cell", [c for c in L.CELLS if c.cases is None and c.grade_id != "test_batch_speed"],
                         ids=lambda c: c.grade_id)
def test_deterministic_checks_pass_reference(reference, cell):
    cell.check(*[getattr(reference, a) for a in cell.args])


@pytest.mark.parametrize("m", [m for m in MUTANTS if m.part in (1, 4)], ids=lambda m: m.name)
def test_deterministic_checks_catch_part1_and_part4_mutants(m):
    ns = namespace("lab1", m)
    failed = []
    for cell in [c for c in L.CELLS if c.part == m.part]:
        try:
            cell.check(*[getattr(ns, a) for a in cell.args])
        except AssertionError as err:
            failed.append(str(err))
            assert "def " not in str(err)  # the message describes the property, it shows no code
    assert failed, m.name


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
    assert sum(bool(m.get("solution")) for m in meta) == 5


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
        return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "autograder")).load_config()
    finally:
        sys.argv = old


@pytest.mark.parametrize(("argv", "timeout"), [(["nbgrader", "autograde", "lab1"], 60),
                                               (["nbgrader", "autograde", "--assignment=lab2"], 120),
                                               (["nbgrader", "db", "student", "list"], 120)])
def test_config_sets_per_lab_timeout_and_course_folders(argv, timeout):
    c = _config(argv)
    assert c.Execute.timeout == timeout
    assert c.CourseDirectory.source_directory == "solutions" and c.CourseDirectory.release_directory == "labs"
    assert "ExecutePreprocessor" not in c  # the key nbgrader 0.9 ignores is not relied on


def test_power_report_is_current_and_meets_target():
    """The committed power table covers this catalog at these sample sizes, all >= 0.999."""
    report = json.loads((ROOT / "autograder" / "mutants" / "lab1_power.json").read_text())
    assert [m["name"] for m in report["mutants"]] == [m.name for m in MUTANTS]
    assert all(m["detection"] >= 0.999 for m in report["mutants"])
    sizes = {name: n for cell in report["cells"] for name, n in cell.get("n", {}).items()}
    assert sizes == {c.name: c.n for cell in L.CELLS if cell.cases for c in cell.cases()}
    assert all(cell["false_failure"] <= L.ALPHA_CELL for cell in report["cells"])


@pytest.mark.slow
def test_power_is_recomputed_for_one_mutant():
    """The power computation itself, on a sampler mutant with few fresh draws (a weaker lower bound)."""
    from autograder.power import lab_power

    report = lab_power("lab1", draws_scale=3, only=["sampler_drafts_argmax"])
    (m,) = report["mutants"]
    assert m["detection"] >= 0.999 and m["via"].startswith("test_sampler_exactness")


def test_strip_markers():
    assert strip_markers("a\n    ### BEGIN SOLUTION\nb\n    ### END SOLUTION\nc") == "a\nb\nc"
