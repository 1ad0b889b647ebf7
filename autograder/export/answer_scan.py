"""The student edition's answer scan: does any public function of the edition pass a hidden check?

`autograder.export.student_release.leaks` finds answers by their text and their names; `answers_in`
finds them by what they do (tests/autograder/export/test_student_release.py runs it on the edition):

    python -m autograder.export.answer_scan answers dist/student/speclab [lab ...]
"""
from __future__ import annotations

import json
import re
from pathlib import Path

# ------------------------------------------------------------- graded answers by what they do
# `leaks` finds answers by their text and GRADED_ANSWERS by their names; `answers_in` finds them by what
# they do. A student function is examined by one or more graded cells (Lab 1's residual_distribution by
# test_residual_distribution and test_input_validation). Each public function of a package takes the
# student function's place in all of them, the other slots holding the reference solution; one that
# passes every cell that looks at that slot (a cell whose check passes with the released stub there does
# not look) could be handed in as it is: an answer. Passing some cells only is not (theory.acceptance_rate
# rejects bad input as residual_distribution must, and is no residual); those are reported as notes.
# Deterministic checks come first and try every function whose signature takes the reference's
# positional arguments; the statistical and timed ones, seconds to minutes a call, try a function only
# once it has passed a deterministic cell, or, for a student function with timed cells only, if their
# names share a word. The check's first call of the student function is read once (the check stops
# there): a function that cannot take its arguments, or raises on them where the reference returns (or
# the other way round), fails that check without running it; a check that passes a function raising
# on a call the reference answers is the one case this screen could miss. Every call has a time limit.
DETERMINISTIC_LIMIT_S = 20.0
SLOW_LIMIT_S = 60.0


class _Recorded(BaseException):
    """Stops a check at its first call of the student function (see _first_call)."""


def _released_stub(*args, **kwargs):
    raise NotImplementedError()


def _quiet_call(fn, args, kwargs, limit_s: float) -> str:
    """'returned', 'raised' or 'late': fn(*args, **kwargs) within limit_s seconds, its output and warnings
    swallowed (autograder.inside.protect.cell_timer, the limit the sandbox's cells run under)."""
    import contextlib
    import io
    import signal
    import warnings

    from autograder.inside.protect import CellTimeout, cell_timer

    previous = signal.getsignal(signal.SIGALRM)
    try:
        with cell_timer(limit_s), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
        return "returned"
    except CellTimeout:
        return "late"
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - a candidate may raise anything, SystemExit included
        return "raised"
    finally:
        signal.signal(signal.SIGALRM, previous)


def _verdict(check, args: list, limit_s: float) -> str:
    """'pass', 'fail' or 'late': check(*args) within limit_s seconds, its output swallowed."""
    return {"returned": "pass", "raised": "fail", "late": "late"}[_quiet_call(check, args, {}, limit_s)]


class _FirstCall:
    """A check's first call of the student function: its arguments (a copy, taken before the call) and
    whether the reference raised on them. None of it when the arguments cannot be copied."""

    def __init__(self, args: tuple, kwargs: dict, raised: bool):
        self.args, self.kwargs, self.raised = args, kwargs, raised

    def same_outcome(self, fn, limit_s: float) -> bool:
        """Does fn, on a copy of these arguments, raise where the reference raised and return where it returned?"""
        import copy

        try:
            args, kwargs = copy.deepcopy((self.args, self.kwargs))
        except Exception:  # noqa: BLE001 - what cannot be copied is not screened
            return True
        outcome = _quiet_call(fn, args, kwargs, limit_s)
        return outcome == "late" or (outcome == "raised") == self.raised  # late: undecided here, the check decides


def _first_call(check, args: list, slot: int, limit_s: float) -> _FirstCall | None:
    """check's first call of args[slot] (the reference, which answers it; the check stops right after),
    or None if the check makes no such call."""
    import copy

    reference_fn, seen = args[slot], []

    def record(*a, **k):
        try:
            saved = copy.deepcopy((a, k))
        except Exception:  # noqa: BLE001
            saved = None
        try:
            reference_fn(*a, **k)
            raised = False
        except Exception:  # noqa: BLE001
            raised = True
        seen.append(None if saved is None else _FirstCall(*saved, raised))
        raise _Recorded()

    _verdict(check, args[:slot] + [record] + args[slot + 1:], limit_s)
    return seen[0] if seen else None


def _public_functions(package: Path, modules: tuple[str, ...] | None) -> dict[str, object]:
    """'module.name' -> function, for each public function that package's modules define themselves.

    Each file is loaded on its own under a private name, so the package need not be importable as
    `speclab` here: its own imports of speclab reach the course's package (the hidden checks need it)."""
    import importlib.util
    import inspect
    import sys

    found = {}
    for py in sorted(Path(package).glob("*.py")):
        if py.stem == "__init__" or (modules is not None and py.stem not in modules):
            continue
        alias = f"_edition_{py.stem}_{abs(hash(str(py.resolve())))}"
        spec = importlib.util.spec_from_file_location(alias, py)
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module  # dataclasses look their module up
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 - a module that cannot load hands out nothing
            print(f"answers_in: {py.name} not loaded ({type(err).__name__}: {err})", file=sys.stderr)
            continue
        for name, obj in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == alias:
                found[f"{py.stem}.{name}"] = obj
    return found


def _binds(fn, args: tuple, kwargs: dict) -> bool:
    import inspect

    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return True


def _takes(fn, n_positional: int) -> bool:
    return _binds(fn, tuple(range(n_positional)), {})


def _required_positional(fn) -> int:
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds and p.default is p.empty for p in inspect.signature(fn).parameters.values())


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z]+", name.lower()) if len(w) >= 4}


def _is_slow(cell) -> bool:
    """A statistical or timed check: seconds to minutes a call."""
    return cell.cases is not None or cell.randomised


def answers_in(package: Path, labs: tuple[str, ...], modules: tuple[str, ...] | None = None,
               slack: float = 1.0, notes: list[str] | None = None) -> list[str]:
    """Each function of package (a speclab folder) that passes every hidden check of a student function
    in its place: 'lab: module.function passes as student_function (cells)'. Functions passing some of
    those checks only are appended to notes. Runs the checks in this process (SIGALRM limits each call:
    call it from a main thread, in a process of its own); slack multiplies the time limits."""
    import importlib
    import os

    from autograder.authoring import reference
    from autograder.checks import DEFER_ENV

    os.environ.pop(DEFER_ENV, None)  # every check runs here, none is left to a grader
    notes = [] if notes is None else notes
    candidates = _public_functions(Path(package), modules)
    found = []
    for lab in labs:
        ref = reference.load(lab)
        examined: dict[str, list[tuple[object, int]]] = {}  # student function -> (cell, slot) of its checks
        for cell in importlib.import_module(f"autograder.checks.{lab}").CELLS:
            for slot, name in enumerate(cell.args):
                examined.setdefault(name, []).append((cell, slot))
        for name, uses in examined.items():
            uses.sort(key=lambda use: _is_slow(use[0]))  # quick cells first
            n_args = _required_positional(getattr(ref, name))
            only_slow = all(_is_slow(cell) for cell, _ in uses)
            looks: dict[str, bool] = {}  # grade id -> whether the check fails with the released stub there
            shapes: dict[str, _FirstCall | None] = {}  # grade id -> the check's first call of the slot

            def run(cell, slot, fn) -> str:
                args = [getattr(ref, arg) for arg in cell.args]
                limit = slack * (SLOW_LIMIT_S if _is_slow(cell) else DETERMINISTIC_LIMIT_S)
                if fn is not _released_stub:  # a function that cannot take the check's first call fails it
                    if cell.grade_id not in shapes:
                        shapes[cell.grade_id] = _first_call(cell.check, args, slot, limit)
                    first = shapes[cell.grade_id]
                    if first is not None and (not _binds(fn, first.args, first.kwargs)
                                              or not first.same_outcome(fn, limit)):
                        return "fail"
                args[slot] = fn
                return _verdict(cell.check, args, limit)

            for qualified, fn in candidates.items():
                if not _takes(fn, n_args) or (only_slow and not _words(qualified) & _words(name)):
                    continue
                passed, late, failed = [], [], None
                for cell, slot in uses:
                    if _is_slow(cell) and not passed and not only_slow:
                        failed = cell.grade_id  # not tried: it passed no quick cell
                        break
                    verdict = run(cell, slot, fn)
                    if verdict != "fail":
                        if cell.grade_id not in looks:
                            looks[cell.grade_id] = run(cell, slot, _released_stub) == "fail"
                        if not looks[cell.grade_id]:
                            continue  # this check does not look at the slot
                    if verdict == "fail":
                        failed = cell.grade_id
                        break
                    (passed if verdict == "pass" else late).append(cell.grade_id)
                if failed is None and (passed or late):
                    how = f" (ran past its time limit in {', '.join(late)}: not ruled out)" if late else ""
                    found.append(f"{lab}: {qualified} passes as {name} ({', '.join(passed + late)}){how}")
                elif passed:
                    notes.append(f"{lab}: {qualified} passes {', '.join(passed)} as {name}, fails {failed}")
    return found


if __name__ == "__main__":  # python -m autograder.export.answer_scan dist/student/speclab [lab ...]
    import sys

    if len(sys.argv) < 3 or sys.argv[1] != "answers":
        raise SystemExit("usage: python -m autograder.export.answer_scan answers SPECLAB_FOLDER [LAB ...]")
    course_root = Path(__file__).resolve().parents[2]
    lab_names = tuple(sys.argv[3:]) or tuple(sorted(p.parent.name for p in (course_root / "solutions").glob("*/*.md")
                                                     if p.stem == p.parent.name))
    partial: list[str] = []
    hits = answers_in(Path(sys.argv[2]), lab_names, notes=partial)
    print("\n".join(f"note: {n}" for n in partial), file=sys.stderr)
    print(json.dumps(hits))
    sys.exit(1 if hits else 0)
