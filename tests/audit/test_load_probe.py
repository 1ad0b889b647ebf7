"""Audit `load_probe` (`make audit load_probe`): the suite's load probe (tests/support/load.py) reads outside busy
loops as contention, and the limits it scales grow with it.

`make test` starts no busy loop: there the probe's arithmetic is tested with the contention given
(tests/autograder/audit/test_timing_load.py); here, the probe itself against real load.
"""
from __future__ import annotations

import os

import load
from autograder.audit.timing_load import busy_loops


def test_busy_loops_raise_the_contention_and_the_limits(monkeypatch):
    cores = os.cpu_count() or 1
    quiet = load._measure_contention()
    with busy_loops(cores, seconds=60):
        busy = load._measure_contention()
    print(f"\ncontention: {quiet:.2f} as the audit found the machine, {busy:.2f} with {cores} busy loop(s)")
    # one busy loop per core halves each probe's share: about 2, far above the quiet threshold
    assert busy >= 1.5 and busy > quiet
    monkeypatch.setattr(load, "contention", lambda: busy)
    assert load.slack() == min(load.MOST, load.SAFETY * busy) and load.scaled(10) > 10
