"""The audits' committed reports: what each audit depends on, and whether its report still holds.

`make test` is quiet and fast; what needs deliberate load, many students or a real lab's time runs in
`make audit` instead (tests/README.md lists every guarantee and where it lives). Each audit writes
`autograder/audit/reports/<name>.json`, and only the command that measures it writes it:

- the grades it gave, per student and cell, each beside the verdict the audit expects;
- the machine, its load and the wall time;
- the outcome of each of its assertions (an audit is a pytest module of tests/audit/, or a command);
- what was left behind afterwards (control groups, scratch mounts);
- `digest`: a hash of every file that can change its verdicts (`inputs`).

`make test` (tests/autograder/audit/test_reports.py) fails when a report's digest is not the tree's
("stale: run `make audit NAME`") and when any of its verdicts is not held. `python -m autograder.audit`
runs the audits (`make audit`: the stale or failing ones; `make audit NAME ...`: those).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "autograder" / "audit" / "reports"
TESTS = ROOT / "tests" / "audit"

# What can change any audit's verdicts: the grader and every wing it runs (a lab's own checks, catalog,
# source and notebooks are added per lab below), the course library, and the tests' shared helpers.
COMMON = ("autograder/__init__.py", "autograder/pipeline", "autograder/inside",
          "autograder/sandbox", "autograder/checks/__init__.py", "autograder/checks/alone.py",
          "autograder/checks/calls.py", "autograder/checks/scoped.py", "autograder/checks/hidden.py", "autograder/checks/independence.py",
          "autograder/checks/models.py",
          "autograder/checks/stats.py", "autograder/checks/timing.py", "autograder/authoring",
          "autograder/audit/mutants/__init__.py", "speclab", "nbgrader_config.py", "pyproject.toml",
          # the tests' helpers an audit runs on (the suite's own scheduling, tests/support/xdist_groups.py, is not one)
          "tests/support/audit_plugin.py", "tests/support/chapter_runner.py", "tests/support/courses.py",
          "tests/support/emulate", "tests/support/grading_fixtures.py", "tests/support/load.py",
          "tests/support/measuring.py", "tests/support/submissions.py", "tests/support/tiny_lab")
SKIP = re.compile(r"(__pycache__|\.pyc$|\.ipynb_checkpoints|(^|/)\.)")


def lab_inputs(lab: str) -> tuple[str, ...]:
    """A lab's own files: its checks, its catalog of wrong solutions, its source and its notebooks."""
    # the catalog is mutants/<lab>.py; mutants/<lab>_power.json and <lab>_visible.json are what audits write
    return (f"autograder/checks/{lab}.py", f"autograder/checks/{lab}_", f"autograder/audit/mutants/{lab}.py",
            f"solutions/{lab}", f"labs/{lab}")


@dataclass(frozen=True)
class Audit:
    name: str
    doc: str
    labs: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()  # more inputs (the book's chapters, an export)
    command: tuple[str, ...] = ()  # a command of its own; empty: the pytest module tests/audit/test_<name>.py
    loaded: bool = False  # starts busy loops: run alone

    @property
    def module(self) -> Path:
        return TESTS / f"test_{self.name}.py"

    def inputs(self) -> list[str]:
        own = () if self.command else (str(self.module.relative_to(ROOT)),)
        return [*COMMON, *(p for lab in self.labs for p in lab_inputs(lab)), *self.extra, *own]


AUDITS = {a.name: a for a in (
    Audit("lab1_class", "A class of 27 Lab 1 students, honest, partial, broken and hostile, under two busy loops.",
          labs=("lab1",), loaded=True),
    Audit("lab2_class", "Lab 2's reference beside a staller, a memory hog, a disk filler and the release, under two "
                        "busy loops.", labs=("lab2",), loaded=True),
    Audit("lab2_timing", "Decoders that are not faster (one that never speculates, a CPU burner, a memoiser) timed "
                         "through the class run's timing phase under two busy loops.", labs=("lab2",), loaded=True),
    Audit("timing_load", "False failures and false passes of Lab 2's speed-up check under two busy loops.",
          labs=("lab2",), extra=("autograder/audit/timing_load.py",), loaded=True,
          command=("-m", "autograder.audit.timing_load", "--runs", "4", "--wrong", "1", "--busy", "2", "--report")),
    Audit("timing_agreement", "Both labs' speed cells: the notebook's figure and the grader's for each correct "
                              "implementation, quiet and under two busy loops; the pending count under load; Lab 1's "
                              "students who try to buy the point.", labs=("lab1", "lab2"),
          extra=("autograder/audit/timing_agreement.py", "autograder/audit/correct.py", "autograder/audit/timing_load.py"),
          loaded=True, command=("-m", "autograder.audit.timing_agreement", "--quiet", "lab1=7", "lab2=5", "--loaded",
                                "10", "--busy", "2", "--report")),
    Audit("timing_parallel", "Lab 1's speed cell of four correct students timed two at a time on cores of their own, "
                             "and one at a time, in turn: the same verdicts, the figures within the tolerance.",
          labs=("lab1",), extra=("autograder/audit/timing_agreement.py", "autograder/audit/correct.py",
                                 "autograder/audit/timing_load.py")),
    Audit("throughput", "Four copies of each lab's reference graded with the timed phase two at a time: students per "
                        "hour, and 500 students projected on a 32-core host and on 8 of them.", labs=("lab1", "lab2"),
          extra=("autograder/audit/cost.py",)),
    Audit("load_probe", "The test suite's load probe reads busy loops as contention.", loaded=True,
          extra=("tests/support/load.py",)),
    Audit("fake_timers", "Every chapter and lab that times, under every fake stopwatch; a measuring chapter "
                             "under two busy loops.",  # the labs run with their hidden tests cut out: no lab's checks
          extra=("solutions/lab1", "solutions/lab2", "book", "_config.yml", "_toc.yml"), loaded=True),
    Audit("gradescope_lab1", "Lab 1's Gradescope zip in an emulated Gradescope container: reference, empty, broken, "
                             "hostile; the same grades as the local pipeline.", labs=("lab1",),
          extra=("autograder/export",)),
    Audit("gradescope_lab2", "Lab 2's reference in an emulated Gradescope container.", labs=("lab2",),
          extra=("autograder/export",)),
    Audit("lab1_nbgrader", "Lab 1's reference, release and catalog mutants under the real `nbgrader autograde`; the "
                           "reference's CPU budget.", labs=("lab1",)),
    Audit("catalog", "Every mutant of both labs' catalogs refused by the hidden check of the property it breaks, "
                     "called directly under a grading run's key.", labs=("lab1", "lab2"),
          extra=("tests/autograder/checks/test_lab1.py", "tests/autograder/checks/test_lab1_ranks.py",
                 "tests/autograder/checks/test_lab2.py",
                 "autograder/audit/power.py")),
    Audit("slurm", "The tiny lab's class of six graded in three shards by a one-node Slurm, from the scripts `python "
                   "-m autograder cluster slurm` writes (an array, two shards at once, and the merge that waits for "
                   "it): every job completes, and the merged grades.csv is byte for byte one run's.",
          extra=("autograder/__main__.py", "autograder/export/cluster.py", "autograder/export/slurm")),
    Audit("lab2_does_less", "A Lab 2 decoder that never speculates and is exact only at the check file's knobs, "
                            "and three that mishandle the knobs (the bonus, their order, p only), graded by the "
                            "class run.", labs=("lab2",)),
)}


def files_of(paths) -> list[Path]:
    """Every file under the given paths (relative to the repository; a path may be a file name's prefix),
    sorted, without caches and hidden files."""
    found: set[Path] = set()
    for rel in paths:
        path = ROOT / rel
        if path.is_dir():
            found.update(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            found.add(path)
        else:  # a prefix: autograder/checks/lab2_ covers lab2_rollback.py, lab2_sampling.py
            found.update(p for p in path.parent.glob(path.name + "*") if p.is_file())
    return sorted(p for p in found if not SKIP.search(str(p.relative_to(ROOT))))


def digest(audit: Audit) -> str:
    """sha256 of the names and contents of every input file of the audit (the same on any clone)."""
    h = hashlib.sha256()
    for path in files_of(audit.inputs()):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:20]


def report_path(name: str) -> Path:
    return REPORTS / f"{name}.json"


def load(name: str) -> dict | None:
    path = report_path(name)
    return json.loads(path.read_text()) if path.is_file() else None


def problems(name: str) -> list[str]:
    """Why the committed report of `name` does not hold for this tree: empty when it does."""
    audit, report = AUDITS[name], load(name)
    if report is None:
        return [f"no report: run `make audit {name}`"]
    out = []
    if report.get("digest") != digest(audit):
        out.append(f"stale: run `make audit {name}` (its report was measured on other inputs)")
    failed = [t for t, v in report.get("tests", {}).items() if v != "passed"]
    if failed:
        out.append(f"assertions not held: {failed}")
    if not report.get("tests"):
        out.append("the report records no assertion")
    wrong = [f"{s} {g}: {c['score']} (expected {c['expected']})" for s, row in report.get("students", {}).items()
             for g, c in row.get("cells", {}).items() if not c.get("held")]
    if wrong:
        out.append(f"grades not as expected: {wrong}")
    left = {k: v for k, v in report.get("left_behind", {}).items() if v}
    if left:
        out.append(f"left behind: {left}")
    return out


def stale() -> list[str]:
    """The audits whose committed report does not hold for this tree."""
    return [name for name in AUDITS if problems(name)]


# ------------------------------------------------------------------ what a report records of its run
def machine() -> dict:
    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {"cores": os.cpu_count(), "cpu": model, "memory_gib": round(os.sysconf("SC_PAGE_SIZE") *
                                                                         os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": platform.python_version(), "torch": torch_version, "kernel": platform.release()}


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def left_behind() -> dict:
    """Control groups and scratch mounts of the grader still present (a grader leaves none once it is over)."""
    groups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("**/speclab-*") if p.is_dir()) \
        if Path("/sys/fs/cgroup").is_dir() else []
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if "speclab-scratch" in line]
    except OSError:
        mounts = []
    return {"control_groups": groups, "mounts": mounts}


def write(name: str, report: dict) -> Path:
    """Write the report of `name`, stamped with its digest; only an audit's own run calls this."""
    audit = AUDITS[name]
    body = {k: v for k, v in report.items() if k not in ("name", "doc", "digest")}  # these are the writer's
    report = {"name": name, "doc": audit.doc, "digest": digest(audit), **body}
    REPORTS.mkdir(parents=True, exist_ok=True)
    path = report_path(name)
    path.write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    return path
