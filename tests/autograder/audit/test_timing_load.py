"""tests/support/load.py: the suite's wall-clock limits follow the contention measured when it started, and its
budgets are CPU time. (The probe against real busy loops: the `load_probe` audit, tests/audit/.)"""
from __future__ import annotations

import os
import subprocess
import sys

import load


def test_the_slack_follows_the_contention_found_and_the_loops_a_caller_starts(monkeypatch):
    monkeypatch.setattr(load, "contention", lambda: 1.05)
    assert load.slack() == 1.0 and load.scaled(10) == 10
    monkeypatch.setattr(load, "contention", lambda: 2.0)
    assert load.slack() == load.SAFETY * 2.0 and load.scaled(10) == 30
    monkeypatch.setattr(load, "contention", lambda: 9.0)
    assert load.slack() == load.MOST
    # an audit that starts one busy loop per core adds one runnable process per core
    monkeypatch.setattr(load, "contention", lambda: 1.0)
    cores = os.cpu_count() or 1
    assert load.slack(busy_loops=cores) == load.SAFETY * 2.0 and load.scaled(10, busy_loops=cores) == 30


def test_the_contention_is_measured_once_and_handed_to_the_test_processes(monkeypatch):
    monkeypatch.setattr(load, "_at_start", None)
    monkeypatch.setenv(load.ENV, "2.5")
    assert load.contention() == 2.5  # the controller's figure, not a new measurement
    monkeypatch.setattr(load, "_measure_contention", lambda: 1.0)
    assert load.contention() == 2.5  # kept: nothing the suite does later changes it
    monkeypatch.setattr(load, "_at_start", None)
    monkeypatch.delenv(load.ENV)
    assert load.measure_at_start() == 1.0 and os.environ[load.ENV] == "1.0"


def test_cpu_time_of_children_counts_what_they_ran_not_what_they_waited():
    c0 = load.cpu_of_children()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
                    "time.sleep(1)"], check=True)
    spent = load.cpu_of_children() - c0
    assert 0.4 <= spent < 1.2, spent
