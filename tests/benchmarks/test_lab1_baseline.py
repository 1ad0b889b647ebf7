"""`benchmarks/lab1_baseline.py`: the vectorised baseline draws what it says, the drift arithmetic is right, one
child process runs end to end, and the committed report's summary is the one its own runs give. No timing is
asserted (a shared 2-core machine): what the timings show is read from the committed report, not judged here.
"""

from __future__ import annotations

import json
import math

import numpy as np
from scipy.stats import chi2, chisquare, ncx2

from benchmarks import lab1_baseline as B

ROWS = 200_000
FALSE_FAILURE = 1e-6  # the chi-square test's level: a correct inverse CDF fails it with this probability
TV_ALTERNATIVE = 0.01


def test_the_vectorised_baseline_draws_its_drafts_from_q():
    """Drafts of 200,000 rows of one q against q, chi-square at level 1e-6. Power against every law at total
    variation >= 0.01 from q is at least 0.9998: the noncentrality is n * sum (d^2 / q) >= n * (2 TV)^2 (Cauchy-
    Schwarz). That class holds a draw whose index is off by one (the next token, wrapped: TV 0.3 for this q) and
    drafts drawn from p instead of q (TV(p, q) = 0.3: the next test)."""
    q = np.array([0.1, 0.4, 0.3, 0.2])
    p = np.array([0.4, 0.3, 0.2, 0.1])
    drafts = B.draws_vectorised(np.tile(p, (ROWS, 1)), np.tile(q, (ROWS, 1)), np.random.default_rng(12))
    counts = np.bincount(drafts, minlength=len(q))
    assert len(counts) == len(q)
    power = ncx2.sf(chi2.ppf(1 - FALSE_FAILURE, len(q) - 1), len(q) - 1, ROWS * (2 * TV_ALTERNATIVE) ** 2)
    assert power >= 0.9998
    assert chisquare(counts, ROWS * q).pvalue > FALSE_FAILURE


def test_the_same_test_sees_a_baseline_that_draws_from_p():
    """The check above can fail: drafts drawn from p (the rows passed in the other order) are refused."""
    q = np.array([0.1, 0.4, 0.3, 0.2])
    p = np.array([0.4, 0.3, 0.2, 0.1])
    wrong = B.draws_vectorised(np.tile(q, (ROWS, 1)), np.tile(p, (ROWS, 1)), np.random.default_rng(12))
    assert chisquare(np.bincount(wrong, minlength=4), ROWS * q).pvalue <= FALSE_FAILURE


def test_drift_and_windows():
    assert B.drift([2.0, 3.0, 2.5]) == 1.5
    assert math.isnan(B.drift([2.0]))
    # rounds at 0.1 .. 2.9 s: windows [0, 1), [1, 2), [2, 3); the last spans 0.9 s and is kept
    times = [0.1, 0.5, 0.9, 1.2, 1.8, 2.1, 2.9]
    values = [1.0, 3.0, 2.0, 10.0, 20.0, 7.0, 9.0]
    assert B.windows(times, values) == [2.0, 15.0, 8.0]
    # a last window spanning 0.2 s of a 1 s width is dropped
    assert B.windows([0.1, 0.9, 1.1, 1.2], [1.0, 2.0, 3.0, 4.0]) == [1.5]


def test_the_summary_takes_medians_of_processes_and_the_worst_window_drift():
    def run(impl, loop, vec, loop_windows, vec_windows):
        return {"impl": impl, "rounds": 9, "baselines": {"loop": {"median": loop, "windows": loop_windows},
                                                         "vectorised": {"median": vec, "windows": vec_windows}}}
    runs = [run("reference", 80.0, 0.30, [70.0, 84.0], [0.30, 0.31]),
            run("reference", 60.0, 0.32, [60.0, 60.0], [0.32, 0.32]),
            run("reference", 90.0, 0.31, [90.0, 99.0], [0.31, 0.31])]
    s = B.summarise(runs)["reference"]
    assert s["loop"]["median"] == 80.0 and s["loop"]["process_drift"] == 1.5
    assert s["loop"]["window_drift"] == 84.0 / 70.0
    assert s["vectorised"]["median"] == 0.31 and math.isclose(s["vectorised"]["process_drift"], 0.32 / 0.30)


def test_one_child_process_times_every_baseline():
    out = B.child("batch_plain", 0.3)
    assert out["impl"] == "batch_plain" and out["rounds"] >= 1
    for b in B.BASELINES:
        assert out["baselines"][b]["median"] > 0


def test_the_committed_reports_summary_is_the_one_its_runs_give():
    """The figures a closing note or a README quotes come from the report's runs, not from an edit."""
    report = json.loads((B.ROOT / "benchmarks" / "cpu" / "lab1_baseline.json").read_text())
    assert {r["impl"] for r in report["runs"]} == set(B.IMPLS)
    assert json.loads(json.dumps(B.summarise(report["runs"]))) == report["summary"]
