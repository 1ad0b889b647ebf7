"""Execute one book chapter (MyST markdown) headless, as the book build does, and report on it.

    python tests/support/chapter_runner.py book/07_machines.md OUT.json [--fakes noise10,reversed,...]
    python tests/support/chapter_runner.py solutions/lab2/lab2.md OUT.json --fakes ... --without-hidden-tests

A lab's source (the reference solution, MyST) runs the same way; --without-hidden-tests cuts the
hidden checks out of its test cells, as the student's release does (they are graded by the
grader, on its own clock), so what runs is what a student runs, with the reference's answers:
the solutions, the demos, the visible tests and the measuring cells.

Runs as a subprocess so that its environment reaches the kernel, which inherits it. Without
--fakes the chapter runs once on the real clock. With --fakes it runs once per fake in ONE
kernel (the imports are paid once): the first pass gets its fake from the environment
variable SPECLAB_FAKE_TIMER, as any executed notebook would; each later pass sets the variable
and calls speclab.measure.set_stopwatch(), which reads it. After every pass a check cell
asserts that the fake of that pass was in use and was asked for times, so a pass cannot
succeed by timing nothing.

The JSON report has one entry per pass: {"fake", "ok", "error" (the failing cell and its
traceback), "fake_calls"}, and for the whole run "seconds" and "widgets" (outputs a built
page would show as a progress widget or bar).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import jupytext
import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)
SWITCH = """import os as _os
from speclab import measure as _m
_os.environ["SPECLAB_FAKE_TIMER"] = {kind!r}
_m.set_stopwatch()"""
# Registered before the chapter: records every cell that raised, by its position in the run,
# to a file, so that a failure is seen even if its error output never reached the client.
WATCH = r"""import traceback as _tb
_cells_run = [0]
def _record_errors(result, _path={errors!r}):
    _cells_run[0] += 1
    err = result.error_in_exec or result.error_before_exec
    if err is not None:
        with open(_path, "a") as f:
            f.write(f"{{_cells_run[0]}}\t{{type(err).__name__}}: {{str(err)[:300]!r}}\n")
get_ipython().events.register("post_run_cell", _record_errors)"""
CHECK = """from speclab import measure as _m
_sw = _m.stopwatch()
assert isinstance(_sw, _m.FakeStopwatch) and _sw.kind == {kind!r}, f"the fake stopwatch is not in use: {{_sw!r}}"
assert _sw.calls > 0, "no timing went through the stopwatch"
open({record!r}, "w").write(str(_sw.calls))  # a file, not stdout: an output message can be lost"""


def progress_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Outputs that a built page would show as a progress widget or bar."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = out.get("text", "") + "".join(str(v) for v in data.values() if isinstance(v, str))
            if "application/vnd.jupyter.widget-view+json" in data or re.search(r"\d+%\|", text):
                found.append(f"cell {i}: {text[:120]!r}")
    return found


def first_error(cells: list) -> str:
    for cell in cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                trace = ANSI.sub("", "\n".join(out.get("traceback", [])))
                return f"cell:\n{cell.source[:1500]}\n---\n{trace[-2500:]}"
    return ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("chapter")
    ap.add_argument("report")
    ap.add_argument("--fakes", default="", help="comma-separated FakeStopwatch kinds, one pass each")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument("--without-hidden-tests", action="store_true", help="cut nbgrader's hidden tests out of the cells")
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    os.environ.pop("JPY_SESSION_NAME", None)  # headless, like the book build
    fakes = [f for f in args.fakes.split(",") if f]
    os.environ.pop("SPECLAB_FAKE_TIMER", None)
    if fakes:
        os.environ["SPECLAB_FAKE_TIMER"] = fakes[0]
    path = Path(args.chapter).resolve()
    chapter = jupytext.read(path)
    body = [c for c in chapter.cells if c.cell_type == "code"]
    if args.without_hidden_tests:
        for c in body:
            c.source = HIDDEN.sub("", c.source)
    nb = nbformat.v4.new_notebook(metadata=chapter.metadata)
    errors_file = Path(f"{args.report}.errors")
    errors_file.unlink(missing_ok=True)
    nb.cells.append(nbformat.v4.new_code_cell(WATCH.format(errors=str(errors_file))))
    passes = []  # (fake, first cell index, end index)
    for i, kind in enumerate(fakes or [""]):
        start = len(nb.cells)
        if kind and i > 0:
            nb.cells.append(nbformat.v4.new_code_cell(SWITCH.format(kind=kind)))
        nb.cells += [nbformat.v4.new_code_cell(c.source) for c in body]
        record = f"{args.report}.calls-{i}"
        Path(record).unlink(missing_ok=True)
        if kind:
            nb.cells.append(nbformat.v4.new_code_cell(CHECK.format(kind=kind, record=record)))
        passes.append((kind, start, len(nb.cells), record))
    t0 = time.perf_counter()
    client = nbclient.NotebookClient(nb, timeout=args.timeout, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(path.parent)}})
    fatal = ""
    try:
        client.execute()
    except Exception as err:  # a timeout or a dead kernel
        fatal = f"{type(err).__name__}: {err}"[-3000:]
    recorded: dict[int, str] = {}  # cell index in nb -> error, from the kernel's own record
    if errors_file.exists():
        for line in errors_file.read_text().splitlines():
            n, _, what = line.partition("\t")
            recorded[int(n) - 1] = what  # WATCH itself is the first cell run: the n-th is nb.cells[n - 1]
    if first_error(nb.cells[:1]):
        fatal += "the error-recording cell failed: " + first_error(nb.cells[:1])
    results = []
    for kind, start, end, record in passes:
        cells = nb.cells[start:end]
        error = first_error(cells) or "".join(
            f"cell {i} raised {recorded[i]} (no error output was received)\n{nb.cells[i].source[:1500]}"
            for i in range(start, end) if i in recorded)
        if not error and fatal and not Path(record).exists():
            error = fatal
        calls = int(Path(record).read_text()) if Path(record).exists() else 0
        if kind and not calls and not error:
            error = f"the check cell of this pass recorded no fake timings: {cells[-1].get('outputs')!r}"[:2000]
        results.append({"fake": kind or "real clock", "ok": not error, "error": error, "fake_calls": calls})
    report = {"chapter": path.name, "passes": results, "seconds": round(time.perf_counter() - t0, 1),
              "widgets": progress_outputs(nb), "fatal": fatal}
    Path(args.report).write_text(json.dumps(report, indent=1))
    sys.exit(0 if all(r["ok"] for r in results) and not fatal else 1)


if __name__ == "__main__":
    main()
