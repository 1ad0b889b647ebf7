"""A student's grade from the opinions on it, and the result file that records it.

Two rules decide a grade from nbgrader's run and the grader's second opinions (the verdict
judged in the grader, autograder/pipeline/judge.py, and the clean re-run in the sandbox):
- `lower_of`: when nbgrader finished the notebook, each test cell keeps the LOWER of nbgrader's
  score and its second opinion (a cell without a second opinion keeps nbgrader's score). So
  hiding tracebacks, faking the kernel's replies or rewriting the gradebook earns nothing;
- `verdict_alone`: when nbgrader could not finish it (the kernel died, the notebook destroyed its
  grading directory), the test cells that passed their second opinion count, the others get 0.

A timed check that could not decide neither takes nor gives points: `timing_notes` makes it a note
of the student's result, and the result's `timing` entry (notebook -> grade id -> notes) feeds
grades.csv's timing column (`timing_column`) and the class summary. The class run grades such a
student again at its end, alone; a cell whose timing is still unclear then has its points held
(`hold_pending`): 0 in the score, the points under the result's `pending` entry and grades.csv's
pending column, until `--retime` grades it again.

A student's result is a `GradingResult`, built by `GradingResult.graded` (the student was graded) or
`GradingResult.failed` (its grader process failed: the short shape, without the graded keys) and written
as JSON by `to_json`. `publish` writes the result file, the only input of the class's merge, once the
student's sandbox is gone; `grader_version` is the digest under which a result may be reused.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.checks.timing import UNDECIDED_MARK, TimingFailure
from autograder.inside.recheck import capped
from autograder.sandbox import Limits, no_links

Opinion = tuple[bool, str]  # (passed, why not)
NOT_REACHED = "not reached"  # how the grader's verdict starts for a cell its harness never got to (judge.py)
Scores = dict[str, dict[str, float]]  # notebook -> grade id -> points


@dataclass
class GradingResult:
    """One student's result (results/<student>.json). The fields after `seconds` are None in a failed
    grading's result, which leaves them out of its JSON; the last three appear once its timed cells were
    timed (`timed_runs`, `bounds_timing`) or held (`pending`)."""

    student: str
    lab: str
    submission_sha256: str  # of what was graded (collect.submission_hash); "" when grading failed
    scores: Scores
    score: float  # the sum of scores
    max_score: float  # the sum of the lab's points
    problems: list[str]  # notes the student reads on its page
    seconds: float  # the grading's own time
    grader_version: str | None = None  # `grader_version`: a result is reused only under the same one
    sandbox: bool | None = None  # graded in a sandbox (not --unsafe)
    sandbox_mode: str | None = None  # bubblewrap | uid | none
    timing: dict[str, dict[str, list[str]]] | None = None  # notebook -> grade id -> notes of an unclear timing
    figures: dict | None = None  # notebook -> grade id -> {figure: [value, order]} (a leaderboard's)
    bounds: dict | None = None  # what its control group used (StudentBounds.usage)
    timed_runs: int | None = None  # how often its timed cells were timed
    bounds_timing: dict | None = None  # what its control group used while they were, on which cores, from when to when
    pending: Scores | None = None  # the points held for unclear timings (hold_pending)

    # the keys in the order each shape has always been written in
    GRADED_KEYS = ("student", "lab", "submission_sha256", "scores", "score", "max_score", "problems", "seconds",
                   "grader_version", "sandbox", "sandbox_mode", "timing", "figures", "bounds", "timed_runs",
                   "bounds_timing", "pending")
    FAILED_KEYS = ("student", "lab", "submission_sha256", "seconds", "scores", "score", "max_score", "problems")

    @classmethod
    def graded(cls, student: str, lab: str, submission_sha256: str, layout: dict, scores: Scores,
               problems: list[str], seconds: float, grader_version: str, sandbox_mode: str | None, timing: dict,
               figures: dict, bounds: dict) -> GradingResult:
        """A graded student's result; layout: notebook -> grade id -> points; sandbox_mode None: --unsafe."""
        return cls(student, lab, submission_sha256, scores, round(sum(sum(c.values()) for c in scores.values()), 6),
                   sum(sum(c.values()) for c in layout.values()), problems, seconds, grader_version,
                   sandbox_mode is not None, sandbox_mode or "none", timing, figures, bounds)

    @classmethod
    def failed(cls, student: str, lab: str, layout: dict, why: str) -> GradingResult:
        """The result of a student whose grader process failed: no points, and a note to grade it again."""
        return cls(student, lab, "", {nb: {g: 0.0 for g in cells} for nb, cells in layout.items()}, 0.0,
                   sum(sum(c.values()) for c in layout.values()), [f"grading failed ({why}); grade this student again"],
                   0.0)

    def to_json(self) -> dict:
        """The result file's object: its shape's keys in their order, None fields left out."""
        order = self.GRADED_KEYS if self.grader_version is not None else self.FAILED_KEYS
        return {k: v for k in order if (v := getattr(self, k)) is not None}

    @classmethod
    def from_json(cls, data: dict) -> GradingResult:
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"not a result file's keys: {sorted(unknown)}")
        return cls(**data)


def lower_of(name: str, nbgrader: dict[str, float], opinions: dict[str, Opinion], judged: set[str],
             deferred: set[str]) -> tuple[dict[str, float], list[str]]:
    """Each cell's score: the lower of nbgrader's and its second opinion's; with a note per cell lowered.

    nbgrader: grade id -> nbgrader's score; opinions: grade id -> (passed, error) for the cells that
    have a second opinion; judged: the cells whose opinion is the grader's own verdict (the others
    come from the clean re-run); deferred: the cells whose check nbgrader's run left to the grader.
    A note says first what lowered the cell, then gives the check's message whole (`capped` only
    against abuse): the feedback page shows its first line and folds the rest. A cell that nbgrader
    already scored 0 (its visible test failed) keeps the message of a hidden check it left to the
    grader, which failed too: that message says what was expected and what came back.
    """
    scores, notes = dict(nbgrader), []
    for gid, score in nbgrader.items():
        if gid not in opinions:
            continue
        ok, err = opinions[gid]
        if ok:
            continue
        err = capped(err)
        if score <= 0:
            # the visible test failed too: the hidden check's own message still teaches (a cell the
            # harness never reached has no such message, and nbgrader's run already says why)
            if gid in judged and gid in deferred and not err.startswith(NOT_REACHED):
                notes.append(f"{name}.ipynb {gid}: {err}")
            continue
        scores[gid] = 0.0
        if gid in judged and gid in deferred:  # nbgrader left this check to the grader: its message is the reason
            notes.append(f"{name}.ipynb {gid}: {err}")
        elif gid in judged:
            notes.append(f"{name}.ipynb {gid}: passed inside the notebook but fails the grader's own check, "
                         f"0 points. {err}")
        elif gid in deferred:  # deferred, then not judgeable after all: the clean re-run decided
            notes.append(f"{name}.ipynb {gid}: checked in a clean re-run of the notebook. {err}")
        else:
            notes.append(recheck_note(name, gid, err))
    return scores, notes


def verdict_alone(points: dict[str, float], opinions: dict[str, Opinion]) -> dict[str, float]:
    """Scores when nbgrader could not finish the notebook: a cell's points when its second opinion passed."""
    return {gid: (pts if opinions.get(gid, (False, ""))[0] else 0.0) for gid, pts in points.items()}


def recheck_note(name: str, gid: str, err: str) -> str:
    """The note for a cell that scored in nbgrader's run and failed the clean re-run. A timed check
    that failed on a clear timing verdict is a measurement of the machine, never a tampering sign."""
    err = capped(err)
    if err.startswith(TimingFailure.__name__):
        return (f"{name}.ipynb {gid}: the timing of the clean re-run gave a clear verdict against it, "
                f"0 points for this timed cell. {err}")
    return (f"{name}.ipynb {gid}: passed inside the notebook but fails in a clean re-run, 0 points "
            f"(did the notebook tamper with grading?). {err}")


def timing_notes(name: str, undecided: dict[str, list[str]]) -> list[str]:
    """One note per timed section of a notebook's cells that gave no clear verdict (no points were
    taken for it): grade id -> the checks' notes (autograder.checks.timing.undecided)."""
    return [f"{name}.ipynb {gid}: {UNDECIDED_MARK} {capped(note)}" for gid, notes in undecided.items() for note in notes]


def timing_column(result: dict) -> str:
    """grades.csv's timing cell of one student: empty when every timed cell gave a clear verdict, else
    `<cell>: undecided` per cell whose timing did not (the notebook named when the lab has several)."""
    timing = result.get("timing") or {}
    several = len(result.get("scores") or {}) > 1
    return "; ".join(f"{f'{nb}:' if several else ''}{gid}: undecided"
                     for nb, cells in timing.items() for gid, notes in cells.items() if notes)


PENDING_MARK = "timing pending:"  # how a held cell's note starts (the feedback and the summary show it)


def timed_points(result: dict) -> dict[str, dict[str, float]]:
    """notebook -> grade id -> the points a cell scored while its timing gave no clear verdict: what an
    unclear timing would award. A cell that scored nothing is left out (its timing decides nothing)."""
    held: dict[str, dict[str, float]] = {}
    for nb, cells in (result.get("timing") or {}).items():
        for gid, notes in cells.items():
            points = float((result.get("scores") or {}).get(nb, {}).get(gid, 0.0))
            if notes and points > 0:
                held.setdefault(nb, {})[gid] = points
    return held


def hold_pending(result: dict, retime: str) -> dict:
    """The result with the points of every cell whose timing is still unclear held back: the cell
    scores 0, its points go under `pending`, and a note says how to time it again (retime: the command)."""
    held = timed_points(result)
    if not held:
        return result
    r = copy.deepcopy(result)
    for nb, cells in held.items():
        for gid, points in cells.items():
            r["scores"][nb][gid] = 0.0
            r["problems"].append(
                f"{nb}.ipynb {gid}: {PENDING_MARK} {points:g} point{'s' if points != 1 else ''} held back: the timing "
                f"(alone, after the class's other checks, then once more) gave no clear verdict; they are neither given nor taken "
                f"until it is timed again ({retime})")
    r["pending"] = held
    r["score"] = round(sum(sum(c.values()) for c in r["scores"].values()), 6)
    return r


TIMED_LATER = "timed after the class's other checks, alone"  # a timed cell's note until time_student judges it


def to_time(result: dict, pending: bool = True) -> dict[str, dict[str, float]]:
    """notebook -> grade id -> points at stake, of the cells a timing must still decide: those marked
    TIMED_LATER by the untimed grading (their current score), and (pending) those held pending (their
    held points)."""
    todo: dict[str, dict[str, float]] = {}
    for nb, cells in (result.get("timing") or {}).items():
        for gid, notes in cells.items():
            if TIMED_LATER in notes:
                todo.setdefault(nb, {})[gid] = float(result["scores"][nb][gid])
    for nb, cells in (result.get("pending") or {}).items() if pending else ():
        for gid, points in cells.items():
            todo.setdefault(nb, {})[gid] = float(points)
    return todo


def timed(result: dict, todo: dict[str, dict[str, float]], judged: dict[str, tuple[dict, dict, dict]],
          retime: str) -> dict:
    """The result once its timed cells are judged. todo: `to_time(result)`; judged: notebook -> (grade id ->
    (passed, error), grade id -> notes of a timing that could not decide, grade id -> figures). A cell
    keeps its points on a clear pass, loses them on a clear fail (with the check's message) and has them
    held (`hold_pending`) when its timing stayed unclear; retime: the command that times it again."""
    r = copy.deepcopy(result)
    heads = tuple(f"{nb}.ipynb {gid}: " for nb, cells in todo.items() for gid in cells)
    r["problems"] = [p for p in r.get("problems", [])  # the earlier timing's notes on these cells
                     if not (p.startswith(heads) and (PENDING_MARK in p or UNDECIDED_MARK in p))]
    pending = r.pop("pending", {}) or {}
    for nb, cells in todo.items():
        opinions, timings, measured = judged.get(nb, ({}, {}, {}))
        scores, notes = lower_of(nb, dict(cells), {g: opinions.get(g, (False, NOT_REACHED)) for g in cells},
                                 set(cells), set(cells))
        for gid in cells:
            r["scores"][nb][gid] = scores[gid]
            pending.get(nb, {}).pop(gid, None)
            tim = r.setdefault("timing", {}).setdefault(nb, {})
            tim.pop(gid, None)
            if timings.get(gid):
                tim[gid] = list(timings[gid])
            elif scores[gid] > 0 and gid in measured:
                r.setdefault("figures", {}).setdefault(nb, {})[gid] = measured[gid]
        r["problems"] += notes + timing_notes(nb, {g: timings[g] for g in cells if timings.get(g)})
    r["timing"] = {nb: c for nb, c in (r.get("timing") or {}).items() if c}
    still = {nb: c for nb, c in pending.items() if c}
    if still:
        r["pending"] = still
    r["score"] = round(sum(sum(c.values()) for c in r["scores"].values()), 6)
    return hold_pending(r, retime)


def timing_failed(result: dict, why: str, retime: str) -> dict:
    """The result when its timed cells could not be judged at all (their grader process failed): each cell's
    points are held, with why."""
    r = copy.deepcopy(result)
    for nb, cells in to_time(r).items():
        for gid, points in cells.items():
            r["scores"][nb][gid] = points  # back to what is at stake, then held
            r.setdefault("timing", {}).setdefault(nb, {})[gid] = [f"the timing could not run ({why})"]
    r.pop("pending", None)
    return hold_pending(r, retime)


def pending_column(result: dict) -> str:
    """grades.csv's pending cell: the points held back for unclear timings, empty when none."""
    total = sum(p for cells in (result.get("pending") or {}).values() for p in cells.values())
    return f"{total:g}" if total else ""


def save_result(out: Path, student: str, result: dict) -> None:
    """Write a student's result file atomically: it exists whole or not at all."""
    folder = out / "results"
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(tmp, folder / f"{student}.json")


# What decides a grade, below a course's code root: the checks, what runs in the sandbox, the sandbox
# itself and the pipeline's grading steps (not report.py and feedback.py, which only render results),
# and the course package with its shipped weights. Audits, exports, authoring tools and benchmarks are
# left out: editing them keeps every cached grade.
GRADE_CODE = ("autograder/checks/*.py", "autograder/inside/*.py", "autograder/sandbox/*.py",
              "autograder/pipeline/*.py", "speclab/*.py", "speclab/weights/*")
RENDERING_ONLY = ("autograder/pipeline/report.py", "autograder/pipeline/feedback.py")


def grade_code_files(code_root: Path, lab_checks: tuple[Path, ...] = ()) -> list[Path]:
    """The files `grader_version` digests, in a fixed order."""
    code_root = Path(code_root)
    files = [p for pattern in GRADE_CODE for p in sorted(code_root.glob(pattern))
             if p.is_file() and p.relative_to(code_root).as_posix() not in RENDERING_ONLY]
    return files + [p for folder in lab_checks for p in sorted(Path(folder).glob("*.py"))]


def grader_version(code_root: Path, template: Path, lab_checks: tuple[Path, ...] = ()) -> str:
    """A digest of everything that decides a grade (`GRADE_CODE`) and of the released lab (the
    template's source stamp). A result is reused only under the same version."""
    h = hashlib.sha256()
    for p in grade_code_files(code_root, lab_checks):
        name = p.relative_to(code_root).as_posix() if p.is_relative_to(code_root) else p.name
        h.update(name.encode() + b"\0" + p.read_bytes())
    stamp = template / "source.sha256"
    h.update(stamp.read_bytes() if stamp.exists() else b"")
    return h.hexdigest()[:16]


def publish(out: Path, lab: str, root: Path, student: str, result: dict, verdict_scratch: Path | None = None,
            kept_mb: int = Limits.kept_mb) -> None:
    """Autograded notebooks and logs out of the student's scratch course (root); then the result file.
    The autograded files kept take at most kept_mb MB together: one that would pass it is not kept, and a
    note on the result says which, how large, and that the score is complete."""
    src = root / "autograded" / student / lab
    dest = out / "autograded" / student / lab
    shutil.rmtree(dest, ignore_errors=True)
    if src.is_dir() and no_links(root, src):
        dest.mkdir(parents=True)
        room = kept_mb << 20
        for f in sorted(src.iterdir()):
            if f.is_file() and not f.is_symlink() and f.suffix in (".html", ".ipynb"):
                size = f.stat().st_size
                if size > room:
                    result.setdefault("problems", []).append(
                        f"{f.name}: the graded copy is {size / 2**20:.0f} MB, more than the {kept_mb} MB a "
                        f"student's graded files may take in the output folder, so it was not kept; the score is "
                        f"complete, and the feedback page shows the released notebook")
                    continue
                room -= size
                shutil.copyfile(f, dest / f.name)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{student}.log", "w") as f:
        for log in ("autograde.log", "verdict.log", "recheck.log"):  # written outside the student's reach
            path = out / "work" / ".logs" / f"{student}.{log}"
            if path.is_file():
                f.write(f"===== {log}\n" + path.read_text(errors="replace")[-20000:] + "\n")
    save_result(out, student, result)
    shutil.rmtree(root, ignore_errors=True)
    if verdict_scratch is not None:
        shutil.rmtree(verdict_scratch, ignore_errors=True)


def is_current(old: dict | None, submission_sha256: str, version: str, unsafe: bool) -> bool:
    """Whether a result stands: the same submission, graded by the same grading code, at least as safely."""
    return bool(old) and old.get("submission_sha256") == submission_sha256 and old.get("grader_version") == version \
        and old.get("sandbox", False) >= (not unsafe)


def load_result(out: Path, student: str) -> dict | None:
    try:
        return json.loads((out / "results" / f"{student}.json").read_text())
    except (OSError, ValueError):
        return None
