"""The pytest side of `make audit`: an audit module of tests/audit/ writes its committed report.

`python -m autograder.audit NAME` runs `pytest tests/audit/test_NAME.py --audit NAME`; tests/conftest.py then
registers this plugin, which
- gives the module the `audit_grades` fixture, where it records each student's grade per cell beside the
  verdict it expects (`student(...)`);
- records each test's outcome, the machine, its load before and after, the wall time, and what the run left
  behind (control groups, scratch mounts, processes of the sandboxes' uids) that was not there before;
- writes autograder/audit/reports/NAME.json through autograder.audit.reports.write, and only when every test
  of the module ran (a run narrowed with -k writes nothing).
A report is never written by hand: this is the one writer besides the audits that are commands.
"""
from __future__ import annotations

import time

import pytest

from autograder.audit import reports


def _processes() -> list[str]:
    from autograder.sandbox import processes_of, slot_uids

    return sorted(f"uid {uid}: pid {pid}" for slot in range(16) for uid in slot_uids(slot) for pid in processes_of(uid))


def _snapshot() -> dict:
    return {**reports.left_behind(), "processes": _processes()}


class Grades:
    """The grades an audit gave, per student and cell, beside the verdict it expects."""

    def __init__(self):
        self.students: dict[str, dict] = {}
        self.figures: dict[str, object] = {}  # what the audit measured, by name, for its report and the changelog

    def figure(self, name: str, value) -> None:
        """Record a measurement (a number, a list or a table of them) in the report under `figures`."""
        self.figures[name] = value

    def student(self, name: str, scores: dict[str, float], expected: dict[str, object],
                held: dict[str, bool] | None = None, pending: dict[str, float] | None = None) -> None:
        """scores: grade id -> points given; expected: grade id -> the points the audit expects, or a sentence
        saying which outcomes it accepts (then `held` says, per such cell, whether the outcome is one of them)."""
        cells = {}
        for gid, score in scores.items():
            want = expected[gid]
            if held is not None and gid in held:
                ok = held[gid]
            elif isinstance(want, (int, float)):
                ok = score == want
            else:
                raise ValueError(f"{name} {gid}: a verdict in words ({want!r}) needs `held` to say if it came out")
            cells[gid] = {"score": score, "expected": want, "held": bool(ok)}
        self.students[name] = {"cells": cells, "score": round(sum(scores.values()), 6),
                               "pending": pending or {}}


class AuditPlugin:
    def __init__(self, name: str):
        self.name = name
        self.grades = Grades()
        self.outcomes: dict[str, str] = {}
        self.collected: list[str] = []
        self.t0 = time.monotonic()
        self.load_before = reports.loadavg()
        self.before = _snapshot()

    @pytest.fixture(scope="session")
    def audit_grades(self) -> Grades:
        return self.grades

    def pytest_collection_modifyitems(self, items):
        self.collected = [item.nodeid for item in items]

    def pytest_runtest_logreport(self, report):
        # a test's outcome is its call's, unless its set-up or tear-down failed (or it was skipped)
        if report.when == "call" or report.failed or report.skipped:
            if self.outcomes.get(report.nodeid) in (None, "passed"):
                self.outcomes[report.nodeid] = report.outcome

    def pytest_sessionfinish(self, session, exitstatus):
        if not self.collected or set(self.outcomes) != set(self.collected):
            print(f"\naudit {self.name}: not every test ran ({len(self.outcomes)} of {len(self.collected)}); "
                  "no report written")
            return
        after = _snapshot()
        left = {k: [x for x in v if x not in self.before.get(k, [])] for k, v in after.items()}
        path = reports.write(self.name, {
            "command": f"make audit {self.name}",
            "wall_s": round(time.monotonic() - self.t0, 1),
            "machine": reports.machine(),
            "load": {"loadavg_before": self.load_before, "loadavg_after": reports.loadavg(),
                     "busy_loops": 2 if reports.AUDITS[self.name].loaded else 0},
            "tests": {n.split("::", 1)[1]: self.outcomes[n] for n in self.collected},
            "students": self.grades.students,
            **({"figures": self.grades.figures} if self.grades.figures else {}),
            "left_behind": left,
        })
        print(f"\naudit {self.name}: report written to {path.relative_to(reports.ROOT)}")
