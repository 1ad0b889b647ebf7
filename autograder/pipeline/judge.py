"""The grader's own verdict: the hidden checks run here, the student's functions in the sandbox.

How a notebook is judged (`judge`):
1. A harness (autograder/inside/harness.py) starts in the student's sandbox and runs the
   notebook's cells in order, except the graded test cells.
2. At each graded test cell it stops and tells the grader. The grader runs that cell's hidden
   check (`autograder.checks.<lab>.check_*`, the very function the test cell calls) in its own
   process with stand-ins for the student's functions: a call to a stand-in is sent to the
   harness, which calls the student's function and sends back its value as plain data
   (autograder/inside/wire.py); each call has a time limit enforced here.
3. The check's own assertions decide pass or fail; statistics, references and timing baselines
   run here, where the student cannot patch them; the student's side of a timing is the round
   trip measured here.

Which cells are judged this way: a graded cell whose hidden tests consist of calls
`_checks.check_NAME(f, g, ...)` on `from autograder.checks import LAB as _checks`, with
f, g, ... names of the student's functions, and whose check sends only portable values.
`Unportable` marks the other cells; they are re-checked by a clean re-run in the sandbox
(`recheck`, autograder/inside/recheck.py), whose answer can only lower nbgrader's score.
"""
from __future__ import annotations

import builtins
import importlib
import json
import os
import re
import select
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autograder.checks import HIDDEN_BEGIN, HIDDEN_END
from autograder.inside import launch
from autograder.inside.clock import LOOK_S, STRETCH, Limit, OwnClock, own_threads, tasks_of, wall_clock
from autograder.inside.recheck import capped
from autograder.inside.wire import CACHE_BYTES, MAX_LINE, Unportable, decode, encode, move_globals, set_rng
from autograder.sandbox import no_links, scratch_path

from .results import NOT_REACHED


def own_clock(group) -> OwnClock:
    """The clock a student's time limits count (autograder/inside/clock.py): wall time less the time the
    threads of its control `group` (bounds.Group, under its CPU quota) and of this grader process (which
    runs its checks) were ready to run but waited for a core. None: the wall clock."""
    if group is None:
        return wall_clock()
    return OwnClock(bound=tasks_of(group.thread_files()), free=own_threads, quota=group.bounds.cpus)


class HarnessGone(BaseException):
    """The student's harness died, hung or broke the protocol (BaseException: checks cannot catch it)."""


class Harness:
    """The grader's end of a harness running in a sandbox (a started sandbox.Session)."""

    def __init__(self, session, refs: dict, limit_s: float = float("inf"), clock: OwnClock | None = None,
                 stretch: float | None = None):
        """limit_s: the notebook's limit, counted by clock (default: wall time) from now; stretch: how far each
        limit may outlast its length in wall time (Config.stretch; None: the clock's own)."""
        self.stretch = STRETCH if stretch is None else stretch
        self.session, self.refs, self.next_id = session, refs, 0
        self.clock = clock or wall_clock()
        self.limit = self.clock.limit(limit_s, self.stretch)
        self.buf = b""
        self.sent: dict[int, tuple[object, str]] = {}  # large arrays the harness already holds

    def _encode_args(self, args) -> list:
        """Large arrays travel once per session (a check's timed calls repeat the same inputs:
        re-sending them would time the pipe, not the student's function)."""
        import numpy as np

        out = []
        for a in args:
            if isinstance(a, np.ndarray) and a.nbytes >= CACHE_BYTES:
                hit = self.sent.get(id(a))
                if hit is not None and hit[0] is a:
                    out.append({"__cached__": hit[1]})
                    continue
                value = encode(a)
                if "__tile__" in value:  # one row and a count: nothing to save by naming it
                    out.append(value)
                    continue
                key = str(len(self.sent))
                self.sent[id(a)] = (a, key)
                out.append({"__cache_as__": key, "value": value})
            else:
                out.append(encode(a, self.refs))
        return out

    def _read(self, limit: Limit) -> dict:
        fd = self.session.stdout_fd
        while b"\n" not in self.buf:
            left = min(limit.left(), self.limit.left())
            if left <= 0:
                raise HarnessGone("no answer within the time limit")
            ready, _, _ = select.select([fd], [], [], min(left, LOOK_S))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise HarnessGone("the notebook's process ended")
            self.buf += chunk
            if len(self.buf) > MAX_LINE:
                raise HarnessGone("an answer larger than the limit")
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            raise HarnessGone("a malformed answer") from None
        if not isinstance(msg, dict):
            raise HarnessGone("a malformed answer")
        return msg

    def _send(self, msg: dict) -> None:
        try:
            self.session.write((json.dumps(msg) + "\n").encode(), max(1.0, min(60.0, self.limit.left())))
        except OSError:
            raise HarnessGone("the notebook's process ended") from None

    def wait_at(self, timeout_s: float) -> str | None:
        """The grade id of the next graded cell the notebook reached (None: the end)."""
        msg = self._read(self.clock.limit(timeout_s, self.stretch))
        if "at" not in msg:
            raise HarnessGone("an answer out of turn")
        return msg["at"]

    def next(self) -> None:
        self._send({"op": "next"})

    def _exchange(self, req: dict, timeout_s: float) -> dict:
        from autograder.checks.alone import SECTIONS

        self.next_id += 1
        req["id"] = self.next_id
        with SECTIONS.released():  # the student's code runs now, not the grader's: other checks may go on
            self._send(req)
            msg = self._read(self.clock.limit(timeout_s + 10, self.stretch))
        if msg.get("id") != self.next_id:
            raise HarnessGone("an answer out of turn")
        return msg

    @staticmethod
    def _raise(error) -> None:
        etype, text = (list(error) + ["", ""])[:2]
        cls = getattr(builtins, str(etype), None)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = RuntimeError
            text = f"{etype}: {text}"
        raise cls(str(text)[:2000])

    def call_each(self, name: str, calls: list, kwargs: dict, timeout_s: float) -> list:
        """[student's name(*args, **kwargs) for args in calls] in one round trip
        (autograder/checks/calls.py); every argument that is not a plain number or string is
        sent once per batch (the harness copies arrays and tensors afresh for each call)."""
        shared, index = [], {}

        def enc(a):
            if a is None or isinstance(a, (bool, int, float, str)):
                return a
            if id(a) not in index:
                index[id(a)] = len(shared)
                shared.append(a)
            return {"__shared__": index[id(a)]}

        encoded = [[enc(a) for a in args] for args in calls]
        kw = {str(k): enc(v) for k, v in kwargs.items()}
        msg = self._exchange({"op": "each", "fn": name, "shared": self._encode_args(shared), "calls": encoded,
                              "kwargs": kw, "timeout": timeout_s}, timeout_s)
        try:
            values = [decode(v) for v in list(msg.get("values") or [])]
            states = list(msg.get("rngs") or [])
            for a, st in zip(shared, states):
                if st is not None:
                    set_rng(a, st)
            move_globals(msg.get("moved"))
        except (Unportable, KeyError, TypeError, ValueError) as err:
            raise AssertionError(f"{name} returned something that is not a plain value ({err})") from None
        if "error" in msg:
            self._raise(msg["error"])
        if len(values) != len(calls):
            raise HarnessGone("an answer of the wrong length")
        return values

    def call(self, name: str, args: tuple, kwargs: dict, timeout_s: float):
        msg = self._exchange({"fn": name, "args": self._encode_args(args), "kwargs": encode(kwargs, self.refs),
                              "timeout": timeout_s}, timeout_s)
        if "error" in msg:
            self._raise(msg["error"])
        try:
            value = decode(msg["value"])
            for a, st in zip(args, msg.get("rngs") or []):  # the grader's generators advance as the student's did
                if st is not None:
                    set_rng(a, st)
            for k, st in dict(msg.get("krngs") or {}).items():
                if st is not None and k in kwargs:
                    set_rng(kwargs[k], st)
            move_globals(msg.get("moved"))
        except (Unportable, KeyError, TypeError, ValueError) as err:
            raise AssertionError(f"{name} returned something that is not a plain value ({err})") from None
        return value



@dataclass(frozen=True)
class CellCheck:
    """A graded cell judged in the grader: check_NAME(student functions...) calls of one checks module."""

    grade_id: str
    module: str  # e.g. autograder.checks.lab1
    calls: tuple[tuple[str, tuple[str, ...]], ...]  # (check function, student function names)


_CALL = re.compile(r"^(\w+)\.(check_\w+)\(\s*([\w\s,]*?)\s*\)\s*$")
_IMPORT = re.compile(r"^from autograder\.checks import (\w+) as (\w+)\s*$")


def cell_checks(sources: dict[str, str]) -> dict[str, CellCheck]:
    """grade id -> CellCheck for the graded cells whose hidden tests are only check calls."""
    out = {}
    for gid, src in sources.items():
        m = re.search(re.escape(HIDDEN_BEGIN) + r"\n(.*?)" + re.escape(HIDDEN_END), src, re.S)
        if not m:
            continue
        lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
        alias, module, calls = None, None, []
        for ln in lines:
            if (im := _IMPORT.match(ln)) and module is None:
                module, alias = f"autograder.checks.{im.group(1)}", im.group(2)
            elif (cm := _CALL.match(ln)) and cm.group(1) == alias:
                names = tuple(a.strip() for a in cm.group(3).split(",") if a.strip())
                calls.append((cm.group(2), names))
            else:
                calls = []
                break
        if module and calls:
            out[gid] = CellCheck(gid, module, tuple(calls))
    return out


def graded_sources(db: Path, lab: str) -> dict[str, str]:
    """grade id -> source of each graded test cell, from the template gradebook (hidden tests included)."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{db}") as gb:
        for nb in gb.find_assignment(lab).notebooks:
            for g in nb.grade_cells:
                try:
                    out[g.name] = gb.find_source_cell(g.name, nb.name, lab).source
                except Exception:  # noqa: BLE001
                    continue
    return out


class _StandIn:
    """What a check gets for a student's function: calls go to the harness in the sandbox."""

    def __init__(self, harness: Harness, name: str, timeout_s: float):
        self.harness, self.__name__, self.timeout_s = harness, name, timeout_s

    def __call__(self, *args, **kwargs):
        return self.harness.call(self.__name__, args, kwargs, self.timeout_s)

    def speclab_call_each(self, calls: list, kwargs: dict) -> list:  # autograder.checks.calls.BATCH_METHOD
        return self.harness.call_each(self.__name__, calls, kwargs, self.timeout_s)


def run_check(harness: Harness, spec: CellCheck, call_timeout_s: float,
              key: bytes | None = None) -> tuple[bool, str, list[str]]:
    """Run one cell's checks in this process against the student's functions in the sandbox.
    (passed, error, timing notes): the error is the check's whole message (capped only against
    abuse, autograder/inside/recheck.py `capped`); the notes are what its timed sections could not
    decide (autograder.checks.timing.undecided), kept whether it passed or not. Raises Unportable
    when a check passes something that cannot cross, and HarnessGone when the student's process is gone.
    key: the student's key of this grading run (autograder/checks/hidden.py); the check's seeds and
    relabellings are drawn from it here, in the grader, after the student's code has run up to this cell."""
    from autograder.checks import hidden, models, timing
    from autograder.checks.alone import SECTIONS

    module = importlib.import_module(spec.module)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        # one thread per check: other students' checks, nbgrader and the harnesses share the cores
        torch.set_num_threads(1)
    harness.refs = models.record()  # the models a check hands over travel as references (checks/models.py)

    def stand_in(name):
        return _StandIn(harness, name, call_timeout_s)

    with timing.recording() as notes:
        try:
            # students' checks overlap in the grader; timed sections and those reading process-wide
            # state run alone (autograder/checks/alone.py)
            with SECTIONS.shared(), hidden.keyed(key):
                for check, names in spec.calls:
                    getattr(module, check)(*[stand_in(n) for n in names])
        except (Unportable, HarnessGone):
            raise
        except Exception as err:  # noqa: BLE001 - the check's failure is the verdict
            return False, failure_message(err), list(notes)
    return True, "", list(notes)


def failure_message(err: BaseException) -> str:
    """`Type: message`, whole (capped only against abuse); a check that raised without a message says so."""
    text = str(err).strip()
    return capped(f"{type(err).__name__}: {text}" if text else f"{type(err).__name__} (the check gave no message)")


# ----------------------------------------------------------------------------- one notebook judged
_SPECS: dict[str, dict] = {}


def cell_specs(template_db: Path, lab: str) -> dict[str, CellCheck]:
    """grade id -> CellCheck for the lab's graded cells the grader can judge (from the template gradebook)."""
    key = f"{template_db}:{template_db.stat().st_mtime_ns}"
    if key not in _SPECS:
        _SPECS[key] = cell_checks(graded_sources(template_db, lab))
    return _SPECS[key]


_ABSENT = object()


def cell_spec(spec: CellCheck):
    """The `CellSpec` of a cell the grader judges (autograder.checks: the one description of a graded
    cell), from its checks module's CELLS: None when the module does not describe the cell (its
    defaults hold), `_ABSENT` when the module cannot be imported (a course without it)."""
    try:
        module = importlib.import_module(spec.module)
    except Exception:  # noqa: BLE001 - a course without that module
        return _ABSENT
    return next((c for c in getattr(module, "CELLS", ()) if c.grade_id == spec.grade_id), None)


def deferred_checks(specs: dict[str, CellCheck]) -> dict[str, CellCheck]:
    """The cells whose checks the pipeline's nbgrader run leaves to the grader's own verdict
    (autograder.checks.defer_to_grader): the cells the verdict judges that their CellSpec does not
    keep inside the notebook (`in_grader=False`)."""
    return {gid: spec for gid, spec in specs.items()
            if (cell := cell_spec(spec)) is not _ABSENT and (cell is None or cell.in_grader)}


def timed_cells(specs: dict[str, CellCheck]) -> set[str]:
    """The cells whose CellSpec says `timed`: the pipeline judges them alone."""
    return {gid for gid, spec in specs.items() if (cell := cell_spec(spec)) not in (None, _ABSENT) and cell.timed}


def judge(box, scratch: Path, name: str, notebook: str, cells: set[str], specs: dict[str, CellCheck],
          cell_timeout_s: float, notebook_timeout_s: float, key: bytes | None = None,
          before_clearing: Callable[[], None] | None = None
          ) -> tuple[dict[str, tuple[bool, str]], set[str], dict[str, list[str]], dict]:
    """The grader's own verdict on one notebook: (grade id -> (passed, error) for the cells judged here,
    the set of the notebook's graded cells it could not judge, grade id -> the timing notes of a cell
    whose timed check could not decide, grade id -> {figure: [value, order]} that a passed timed check
    measured, for a leaderboard). box: the student's verdict sandbox
    (autograder.sandbox.StudentBox); scratch: its folder, outside the student's course folder, so the
    notebook nbgrader runs at the same time can neither read nor replace it. key: the student's hidden-input
    key of this run (run_check). before_clearing: called once the notebook's process is gone and before its
    scratch is emptied (StudentBounds.sample, so that a scratch it filled is seen however fast)."""
    from autograder.checks import timing

    judged: dict[str, tuple[bool, str]] = {}
    unportable: set[str] = set()
    undecided: dict[str, list[str]] = {}
    figures: dict[str, dict[str, list]] = {}  # grade id -> what its passed timed checks measured (timing.figure)
    if not cells & set(specs):
        return judged, cells, undecided, figures
    shutil.rmtree(scratch, ignore_errors=True)
    for sub in ("home", "runtime", "ipython"):
        (scratch / sub).mkdir(parents=True)
    work = scratch / "verdict"
    work.mkdir()
    copy = work / f"{name}.ipynb"
    copy.write_text(notebook)
    box.give(scratch)
    switch = any(getattr(importlib.import_module(s.module), "NOTEBOOK_READS_GRADING", False) for s in specs.values())
    cmd = launch(box.code_root, "autograder.inside.harness", "serve", copy, "--cell-timeout", int(cell_timeout_s),
                 *(["--grading-switch"] if switch else []))
    session = box.session(cmd, work, scratch, box.env(scratch), "verdict.log")
    harness = Harness(session, {}, notebook_timeout_s, own_clock(getattr(box, "group", None)),
                      getattr(box, "stretch", None))
    gone = "the notebook ended before it"
    try:
        while (gid := harness.wait_at(notebook_timeout_s)) is not None:
            if gid in specs and gid in cells and gid not in judged:
                try:
                    with timing.measuring() as measured:
                        ok, err, notes = run_check(harness, specs[gid], cell_timeout_s, key)
                    judged[gid] = (ok, err)
                    if notes:
                        undecided[gid] = notes
                    if ok and measured:
                        figures[gid] = {fig: list(v) for fig, v in measured.items()}
                except Unportable:
                    unportable.add(gid)
            harness.next()
    except HarnessGone as err:
        gone = f"the notebook's process stopped answering: {err}"
    finally:
        session.close()
        if before_clearing is not None:
            before_clearing()
        shutil.rmtree(scratch, ignore_errors=True)
    for gid in (cells & set(specs)) - set(judged) - unportable:
        judged[gid] = (False, f"{NOT_REACHED} ({gone})")
    return judged, (cells - set(specs)) | unportable, undecided, figures


def recheck(box, root: Path, name: str, notebook: str, only: set[str], cell_timeout_s: float,
            notebook_timeout_s: float) -> dict[str, tuple[bool, str]]:
    """Clean re-run of a notebook (autograder/inside/recheck.py) for the cells the grader cannot judge
    itself (`only`; the other test cells are skipped and the run stops after the last of these):
    grade id -> (passed, error). It runs in the student's sandbox (box, root: the student's course
    folder), so its answer is only ever used to LOWER nbgrader's score."""
    scratch_path(root, "tmp").mkdir(exist_ok=True)
    out = scratch_path(root, "tmp", f"recheck-{name}.jsonl")
    copy = scratch_path(root, "tmp", f"recheck-{name}.ipynb")
    copy.unlink(missing_ok=True)
    out.unlink(missing_ok=True)
    copy.write_text(notebook)
    box.give(root / "tmp")
    cmd = launch(box.code_root, "autograder.inside.recheck", copy, out, "--root", box.code_root,
                 "--cell-timeout", int(cell_timeout_s), "--only", ",".join(sorted(only)))
    box.run(cmd, copy.parent, root, box.env(root), notebook_timeout_s, "recheck.log")
    passed: dict[str, tuple[bool, str]] = {}
    if out.is_file() and no_links(root, out):
        for line in out.read_text(errors="replace").splitlines()[:1000]:
            try:
                rec = json.loads(line)
                passed.setdefault(str(rec["grade_id"]), (bool(rec["passed"]), capped(str(rec.get("error") or ""))))
            except (ValueError, KeyError, TypeError):
                continue
    return passed
