"""`benchmarks/lab1_baseline.py`: the former loop baseline makes the draws it says, the drift arithmetic is right, one
child process runs end to end, and the committed report's summary is the one its own runs give. No timing is
asserted (a shared 2-core machine): what the timings show is read from the committed report, not judged here.
"""

from __future__ import annotations

import json
import math

import numpy as np

from benchmarks import lab1_baseline as B


def test_the_former_baseline_makes_two_draws_per_row_and_samples_nothing():
    """The loop the speed test used to divide by: exactly a draft from q and one uniform per row, nothing returned.
    (The baseline of the speed test now, `speedtest.draws_vectorised`, is tested in tests/speclab/.)"""
    from speclab import speedtest

    p, q = speedtest.batch_pair(np.random.default_rng(0))
    rng, twin = np.random.default_rng(1), np.random.default_rng(1)
    assert B.draws_loop(np.tile(p, (5, 1)), np.tile(q, (5, 1)), rng) is None
    for _ in range(5):
        twin.choice(4, p=q)
        twin.random()
    assert rng.random() == twin.random()


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
