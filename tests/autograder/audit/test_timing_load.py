"""tests/load.py: the suite's wall-clock limits follow the machine's load, and its budgets are CPU time."""
from __future__ import annotations

import os
import subprocess
import sys

import load
from autograder.audit.timing_load import busy_loops


def test_busy_loops_raise_the_contention_and_the_limits(monkeypatch):
    cores = os.cpu_count() or 1
    quiet = load._measure_contention()
    with busy_loops(cores, seconds=60):
        busy = load._measure_contention()
    print(f"\ncontention: {quiet:.2f} as the suite found the machine, {busy:.2f} with {cores} busy loop(s)")
    # one busy loop per core halves each probe's share: about 2, far above the quiet threshold
    assert busy >= 1.5 and busy > quiet
    monkeypatch.setattr(load, "contention", lambda: busy)
    assert load.slack() == min(load.MOST, load.SAFETY * busy) and load.scaled(10) > 10
    monkeypatch.setattr(load, "contention", lambda: 1.05)
    assert load.slack() == 1.0 and load.scaled(10) == 10


def test_cpu_time_of_children_counts_what_they_ran_not_what_they_waited():
    c0 = load.cpu_of_children()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
                    "time.sleep(1)"], check=True)
    spent = load.cpu_of_children() - c0
    assert 0.4 <= spent < 1.2, spent
