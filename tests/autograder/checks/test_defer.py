"""The pipeline's nbgrader run leaves the judged checks to the grader (autograder.checks.defer_to_grader)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import autograder.checks.lab1 as C
wrong = lambda *a: 0.0
C.check_acceptance_prob(wrong)  # deferred: returns quietly
print("DEFERRED-" + "OK")
try:
    C.check_residual_distribution(wrong)  # not named: the real check
except Exception as err:
    print("real check:", type(err).__name__)
import autograder.checks.lab2 as D
print("rollback deferred:", D.check_rollback.__module__ != "autograder.checks.lab2")
"""


def _run(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SPECLAB_DEFER_CHECKS"}
    if env_value is not None:
        env["SPECLAB_DEFER_CHECKS"] = env_value
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    return proc.stdout + proc.stderr


def test_named_checks_are_deferred_others_are_real():
    out = _run("autograder.checks.lab1:check_acceptance_prob;autograder.checks.lab2:check_rollback")
    assert "check_acceptance_prob: run by the grader outside this notebook" in out and "DEFERRED-OK" in out
    assert "real check: AssertionError" in out
    assert "rollback deferred: False" in out  # in_grader = False: never deferred


def test_without_the_variable_nothing_is_deferred():
    out = _run(None)
    assert "DEFERRED-OK" not in out and "AssertionError" in out


def test_a_check_calling_another_gets_the_real_one():
    import autograder.checks as checks

    calls = []
    ns = {"__name__": "fake.module"}

    def check_inner(x):
        calls.append(x)

    ns["check_inner"] = check_inner
    os.environ["SPECLAB_DEFER_CHECKS"] = "fake.module:check_inner"
    try:
        checks.defer_to_grader(ns)
    finally:
        del os.environ["SPECLAB_DEFER_CHECKS"]
    ns["check_inner"](1)  # called from here, a notebook's place: deferred
    exec("def check_outer():\n    check_inner(2)\n", ns)  # a function of the checks module itself
    ns["check_outer"]()
    assert calls == [2]


def test_the_variable_round_trips_through_its_one_writer_and_reader():
    from autograder.checks import defer_value, deferred_names

    value = defer_value({"autograder.checks.lab1": ["check_sampler", "check_block_exactness"],
                         "autograder.checks.lab2": ["check_speedup"]})
    assert deferred_names("autograder.checks.lab1", value) == ["check_sampler", "check_block_exactness"]
    assert deferred_names("autograder.checks.lab2", value) == ["check_speedup"]
    assert deferred_names("autograder.checks", value) == [] and deferred_names("autograder.checks.lab1", "") == []
