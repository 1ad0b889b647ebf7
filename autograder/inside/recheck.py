"""Clean re-check of an autograded notebook: its cells re-run in a fresh plain interpreter.

Run inside the sandbox as `launch(ROOT, "autograder.inside.recheck", NOTEBOOK, RESULT.json, "--root", ROOT,
["--cell-timeout", S], ["--only", "GRADE_ID,..."])` (autograder/inside/__init__.py). With --only, the run stops once every test cell
named has run: the cells after the last of them cannot change its result, and re-checking
one cell early in a lab then costs the cells up to it, not the whole notebook.

Why: inside the Jupyter kernel, the student's code runs before the hidden tests in the same
process and can tamper with what decides a pass: hide tracebacks, replace functions of numpy,
scipy.stats, torch or the course's checks, shadow the `autograder` package with files of its
own. Here:
- the protected modules (numpy, scipy, torch if the notebook uses it, autograder) are
  imported and snapshotted BEFORE any student code runs, and restored right before every
  graded test cell (`protect.py` says what is restored);
- a test cell passes iff executing it raises nothing: exceptions are caught by this runner,
  not displayed by anything the student can override;
- the working directory is not on sys.path (-I), so files the notebook wrote cannot
  shadow course modules.
The pipeline keeps, per graded cell, the lower of nbgrader's score and this re-check.
Limit: this is an in-process defence (protect.py); the grader's own verdict (harness.py on
the sandbox side, autograder/pipeline/judge.py on the grader's) is the out-of-process one.
"""
from __future__ import annotations

import builtins
import json
import os
import sys
from contextlib import redirect_stderr, redirect_stdout

PROTECTED = ("numpy", "scipy", "torch", "autograder", "json")
# Characters of a failure message that travel on to the feedback: a check's message, however long,
# is written for the student and reaches the page whole; only past this does it look like abuse.
MESSAGE_CAP = 20_000


def capped(text: str, cap: int = MESSAGE_CAP) -> str:
    """text, or its first `cap` characters and a line saying how many more there were."""
    if len(text) <= cap:
        return text
    return f"{text[:cap]}\n[... cut: {len(text) - cap} more characters]"


def main(argv: list[str]) -> int:
    nb_path, out_path = argv[0], argv[1]
    root = argv[argv.index("--root") + 1]
    timeout = int(argv[argv.index("--cell-timeout") + 1]) if "--cell-timeout" in argv else 60
    left = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None  # cells still to judge
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path.insert(0, root)
    os.environ.setdefault("MPLBACKEND", "Agg")
    from autograder.inside.protect import CellTimeout, Shell, cell_timer, restore, snapshot

    with open(nb_path, encoding="utf-8") as f:
        nb = json.load(f)
    from IPython.core.inputtransformer2 import TransformerManager  # before student code, like the rest

    transform = TransformerManager().transform_cell
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    text = "\n".join("".join(c.get("source", "")) for c in cells)
    prefixes = tuple(p for p in PROTECTED if p != "torch" or "torch" in text)
    for name in ("numpy", "scipy.stats", "torch", "autograder.checks", "matplotlib.pyplot"):
        if name.split(".")[0] in prefixes or name.startswith("matplotlib"):
            try:
                __import__(name)
            except Exception:  # noqa: BLE001 - a module the course does not have
                pass
    for c in cells:  # the course's check modules the test cells import
        for line in "".join(c.get("source", "")).splitlines():
            if line.startswith("from autograder.checks import "):
                try:
                    __import__("autograder.checks." + line.split()[3])
                except Exception:  # noqa: BLE001
                    pass
    snap = snapshot(prefixes)
    write, dumps, fsync = os.write, json.dumps, os.fsync
    out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": lambda: Shell(),
                "display": print}
    devnull = open(os.devnull, "w")
    quiet_out, quiet_err = redirect_stdout, redirect_stderr  # held before the student's code runs, as write is
    for c in cells:
        if left is not None and not left:
            break  # every cell asked for has its result
        meta = c.get("metadata", {}).get("nbgrader", {})
        graded = bool(meta.get("grade")) and not meta.get("solution")
        if graded and left is not None:
            left.discard(meta.get("grade_id"))
        if graded:
            restore(snap)
        error = None
        try:
            with cell_timer(timeout), quiet_out(devnull), quiet_err(devnull):  # the cells' output is not kept
                exec(compile(transform("".join(c.get("source", ""))), "<cell>", "exec"), ns)  # noqa: S102
        except CellTimeout:
            error = f"CellTimeout: no result within {timeout} s"
        except BaseException as err:  # noqa: BLE001 - the cell's error is its result
            error = capped(f"{type(err).__name__}: {err}")
        if graded:
            line = dumps({"grade_id": meta.get("grade_id"), "passed": error is None, "error": error})
            write(out_fd, (line + "\n").encode())
            fsync(out_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
