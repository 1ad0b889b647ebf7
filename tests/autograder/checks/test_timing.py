"""Timed grading (autograder.checks.timing): the lock, the sequential sign test and its error rates,
and the record of a timing that could not decide (`undecided`, `recording`).

False failures: for code whose per-round ratio has a median at or above the bar, a clause
fails with probability <= ALPHA_CLAUSE (Bonferroni over the looks); the exact figure,
power(1/2), is computed below with scipy.stats.binom and must not exceed it. Power: a
decoder whose every round falls below the bar fails for sure; one whose rounds fall below
with probability 0.95 fails with probability >= 0.98 (computed exactly, not sampled; 0.87 at 0.9).
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from scipy import stats

from autograder.checks import timing
from autograder.pipeline.results import recheck_note


def test_thresholds_by_hand():
    # 7 rounds: P(Binom(7, 1/2) = 0) = 1/128 = 0.0078 <= 0.0079 < P(<= 1) = 8/128: fail iff no round is above
    assert timing.thresholds(7, 0.0079) == (0, 7)
    # 10 rounds: 1/1024 = 0.00098 <= 0.0011 < 11/1024
    assert timing.thresholds(10, 0.0011) == (0, 10)
    for n, a in zip(timing.LOOKS, timing.LOOK_ALPHAS):
        fail_at_most, pass_at_least = timing.thresholds(n, a)
        assert fail_at_most >= 0, "every look must be able to fail"
        assert stats.binom.cdf(fail_at_most, n, 0.5) <= a < stats.binom.cdf(fail_at_most + 1, n, 0.5)
        assert pass_at_least == n - fail_at_most
    assert timing.thresholds(5, 0.0079) == (-1, 6)  # too few rounds: no verdict either way
    assert timing.alpha_at(7) == timing.LOOK_ALPHAS[0] and timing.alpha_at(8) == timing.LOOK_ALPHAS[1]


def test_pass_thresholds_spend_their_own_budget():
    """A pass needs 7 of 7, 9 of 10, 12 of 14, 15 of 18 or 18 of 22 rounds at or above the bar: the smallest
    count whose probability under Binom(n, 1/2) (a median exactly at the bar) is within the look's budget."""
    passes = [timing.thresholds(n, a, b)[1] for n, a, b in zip(timing.LOOKS, timing.LOOK_ALPHAS, timing.PASS_ALPHAS)]
    assert passes == [7, 9, 12, 15, 18]
    for n, b, y in zip(timing.LOOKS, timing.PASS_ALPHAS, passes):
        assert stats.binom.sf(y - 1, n, 0.5) <= b < stats.binom.sf(y - 2, n, 0.5)
    fails = [timing.thresholds(n, a, b)[0] for n, a, b in zip(timing.LOOKS, timing.LOOK_ALPHAS, timing.PASS_ALPHAS)]
    assert fails == [0, 0, 1, 2, 3]  # the fail side is the symmetric test's, unchanged
    assert timing.verdict([1.5] * 9 + [1.1], 1.3) == "pass"  # 9 of 10: was inconclusive when the sides mirrored
    assert timing.verdict([1.5] * 8 + [1.1] * 2, 1.3) == "inconclusive"


def test_verdicts():
    assert timing.verdict([1.5] * 7, 1.3) == "pass"
    assert timing.verdict([1.1] * 7, 1.3) == "fail"
    assert timing.verdict([1.5] * 6 + [1.1], 1.3) == "inconclusive"
    assert timing.verdict([1.1] * 4, 1.3) == "inconclusive"  # 4 rounds can never be clear at this level
    assert timing.verdict([1.3] * 7, 1.3) == "pass"  # at the bar counts as meeting it


def test_false_pass_and_the_chance_of_deciding_computed_exactly():
    """Code whose rounds are at or above the bar half the time is passed with probability 1.9 % (exact), within
    the Bonferroni budget ALPHA_PASS (3.1 %); code at or above the bar in 90 % of its rounds is decided (passed)
    at the first look with probability 0.48 and by the last with 0.96, by the sum over every path of the test."""
    fp = timing.pass_probability(0.5)
    assert fp == pytest.approx(0.0188, abs=5e-4) and fp <= timing.ALPHA_PASS <= 0.032
    # by hand at the first look: all 7 rounds above the bar
    assert timing.outcome_probabilities(0.1)[0][1] == pytest.approx(0.9 ** 7)
    assert timing.decided_by(0.1, 7) == pytest.approx(0.9 ** 7 + 0.1 ** 7)
    assert timing.decided_by(0.1, 22) == pytest.approx(0.959, abs=1e-3)
    assert timing.decided_by(0.0, 7) == pytest.approx(1.0)
    assert timing.pass_probability(0.1) + timing.power(0.1) <= 1 + 1e-12
    assert timing.pass_probability(0.7) < timing.pass_probability(0.5) < timing.pass_probability(0.3)


def test_false_failure_and_power_computed_exactly():
    ff = timing.power(0.5)
    assert ff <= timing.ALPHA_CLAUSE
    assert 2 * 2 * timing.ALPHA_CLAUSE <= 1 / 20  # two clauses, and the re-check times the cell again
    assert timing.power(1.0) == pytest.approx(1.0)
    assert timing.power(0.95) >= 0.98
    assert timing.power(0.3) < timing.power(0.5) < timing.power(0.7) < timing.power(0.9)
    print(f"false failure per clause {ff:.4f}; power at theta = 0.8, 0.9, 0.95: "
          f"{timing.power(0.8):.3f}, {timing.power(0.9):.3f}, {timing.power(0.95):.4f}")


def test_sequential_rounds_stop_at_a_clear_verdict_and_keep_pairs():
    calls = []
    fns = [lambda: calls.append("base"), lambda: calls.append("cand")]
    rounds = timing.sequential_rounds(fns, ["base", "cand"], lambda r: len(r.times) >= 13, budget_s=60)
    assert len(rounds.times) == 14  # looks at 7 (no), 10 (no), 14 (yes)
    assert calls == ["base", "cand"] * 15  # one warm-up round, then paired rounds in order
    assert len(rounds.ratios("base", "cand")) == 14


def test_sequential_rounds_complete_the_first_look_then_respect_the_budget():
    rounds = timing.sequential_rounds([lambda: time.sleep(0.01)], ["x"], lambda r: False, budget_s=0.05)
    assert len(rounds.times) == timing.LOOKS[0]  # a look with fewer rounds could never be clear
    rounds = timing.sequential_rounds([lambda: time.sleep(0.05)], ["x"], lambda r: False, budget_s=0.05,
                                      hard_limit_s=0.2)
    assert 1 <= len(rounds.times) <= 6  # the hard limit cuts even the first look short


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_the_lock_serialises_timed_sections_across_processes(tmp_path, monkeypatch):
    lock = tmp_path / "timing.lock"
    monkeypatch.setenv(timing.LOCK_ENV, str(lock))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with timing.timing_lock(wait_s=30) as note:
            waited = time.monotonic() - t0
        assert note == "" and 1.0 <= waited < 20, waited  # waited for the other "worker"
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_held_forever_only_delays(tmp_path, monkeypatch):
    lock = tmp_path / "timing.lock"
    monkeypatch.setenv(timing.LOCK_ENV, str(lock))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with timing.timing_lock(wait_s=0.5) as note:
            pass
        assert "without the graders' lock" in note
    finally:
        holder.kill()
        holder.wait()


def test_no_lock_configured_is_a_no_op(monkeypatch):
    monkeypatch.delenv(timing.LOCK_ENV, raising=False)
    with timing.timing_lock() as note:
        assert note == ""


def test_a_timing_verdict_in_the_recheck_is_not_called_tampering():
    timed = recheck_note("lab2", "test_speedup", "TimingFailure: speedup ... clearly below the required 1.3x")
    assert "tamper" not in timed and "timing" in timed
    other = recheck_note("lab2", "test_greedy", "AssertionError: differs")
    assert "tamper" in other


def test_an_undecided_timing_is_printed_where_nobody_records(capsys):
    timing.undecided("no clear verdict after 22 paired rounds")
    assert capsys.readouterr().out == "timing undecided: no clear verdict after 22 paired rounds\n"


def test_an_undecided_timing_is_recorded_not_printed_while_the_grader_records(capsys):
    with timing.recording() as notes:
        timing.undecided("first")
        with timing.recording() as inner:  # a check run inside another: the innermost record keeps it
            timing.undecided("second")
        timing.undecided("third")
    assert notes == ["first", "third"] and inner == ["second"]
    assert capsys.readouterr().out == ""
    timing.undecided("after")  # the record is over: printed again
    assert capsys.readouterr().out == "timing undecided: after\n"


def test_each_thread_records_only_its_own_checks(capsys):
    """Students' checks run side by side in the grader, one worker thread each: a note goes to the
    student whose check made it, never to another's."""
    got: dict[str, list[str]] = {}
    started = threading.Barrier(2)

    def student(name: str) -> None:
        with timing.recording() as notes:
            started.wait()  # both records open at once
            for i in range(50):
                timing.undecided(f"{name} {i}")
                time.sleep(0)
        got[name] = notes

    threads = [threading.Thread(target=student, args=(n,)) for n in ("ada", "bea")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {n: [f"{n} {i}" for i in range(50)] for n in ("ada", "bea")}
    assert capsys.readouterr().out == ""


def test_figures_are_kept_only_while_the_grader_measures_and_per_thread():
    """timing.figure: dropped outside `measuring()` (a student's own run), kept inside; one thread's figures
    never reach another's (students' checks run side by side in the grader)."""
    import threading

    from autograder.checks import timing

    timing.figure("dropped", 1.0)
    seen = {}

    def other():
        with timing.measuring() as figs:
            timing.figure("other", 2.0, "asc")
        seen["other"] = figs

    with timing.measuring() as mine:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        timing.figure("speed-up", 3.5)
    assert mine == {"speed-up": (3.5, "desc")} and seen["other"] == {"other": (2.0, "asc")}
    with pytest.raises(ValueError, match="order"):
        timing.figure("x", 1.0, "up")


# ----------------------------------------------------------------------------- clocks
def _spin(cpu_s: float) -> None:
    t0 = time.thread_time()
    while time.thread_time() - t0 < cpu_s:
        pass


def test_the_graders_clocks_charge_the_student_its_own_clock_and_the_course_its_thread():
    """cpu_clocks: a student's label is timed by the student's clock (in the pipeline its control group's CPU
    time), the course's by this thread's CPU time: a course call that sleeps costs it nothing, one that works
    costs what it worked, and whatever another thread of the grader burns meanwhile is not counted."""
    reads = iter([10.0, 10.25])
    with timing.student_clock(lambda: next(reads)):
        clock_of = timing.cpu_clocks({"mine"})
        assert clock_of("mine")(lambda: None) == pytest.approx(0.25)  # read from the student's clock alone
        assert clock_of("course")(lambda: time.sleep(0.2)) < 0.05  # waiting is no work
        busy = threading.Thread(target=_spin, args=(0.3,))
        busy.start()
        worked = clock_of("course")(lambda: _spin(0.1))
        busy.join()
        assert 0.1 <= worked < 0.25, worked  # its own 0.1 s, not the other thread's


def test_wall_clocks_where_the_student_clock_is_a_wall_clock_or_the_device_a_gpu():
    from speclab.clock import wall_time

    with timing.student_clock(time.perf_counter, cpu=False):  # a machine without control groups
        assert timing.cpu_clocks({"mine"})("course") is wall_time and timing.cpu_clocks({"mine"})("mine") is wall_time
    assert timing.cpu_clocks({"mine"}, "cuda")("course") is wall_time
    assert timing.cpu_clocks({"mine"})("course") is not wall_time  # in-process, on a CPU: CPU time


def test_paired_rounds_time_cpu_work_on_a_cpu():
    """On a CPU (the notebook's speed cells and the grader alike) a round's time is CPU time: a call that sleeps
    a tenth of a second measures under 0.05 s, so a loaded machine that keeps a call waiting does not make it
    look slower."""
    rounds = timing.paired_rounds([lambda: time.sleep(0.1), lambda: _spin(0.05)], ["sleeps", "works"],
                                  lambda r: True, budget_s=5)
    assert all(t < 0.05 for t in rounds.column("sleeps")), rounds.times
    assert all(t >= 0.05 for t in rounds.column("works")), rounds.times


def test_a_timed_section_runs_inside_the_pipelines_pin_and_only_there():
    """autograder.checks.timing.pinning: the pipeline's pin (bounds.one_core on the student's group) is entered when
    a timed section starts and left when it ends; outside the pipeline nothing is entered."""
    from contextlib import contextmanager

    from autograder.checks import timing

    log = []

    @contextmanager
    def pin():
        log.append("pinned")
        yield
        log.append("unpinned")

    with timing.timing_lock():
        log.append("timed alone")
    with timing.pinning(pin):
        log.append("untimed")
        with timing.timing_lock():
            log.append("timed")
    assert log == ["timed alone", "untimed", "pinned", "timed", "unpinned"]
