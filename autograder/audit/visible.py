"""Do the released notebook's visible tests predict the hidden ones? One row per catalog mutant.

    .venv/bin/python -m autograder.audit.visible lab1            # run, print the table
    .venv/bin/python -m autograder.audit.visible lab1 --write    # also write the committed report
    .venv/bin/python -m autograder.audit.visible lab1 --check    # exit 1 when the committed report is stale

A student sees only the visible part of each graded test cell. For the reference solution and for
every mutant of the catalog (`autograder.audit.mutants.<lab>`), this fills the released notebook
(`labs/<lab>/<lab>.ipynb`) with that code (`make_submission`, as a student would hand it in) and runs
its code cells in order in one namespace, in this process, as `NBGRADER_EXECUTION` is set (the
notebook's sweeps shrink; no hidden test is in a released notebook). A mutant is *flagged* when some
graded test cell raises: the student would see a failing visible test before handing it in.

The committed report, `autograder/audit/mutants/<lab>_visible.json`, records the digest of what it
was computed from (the released notebook, the lab's source and the catalog); tests/autograder/audit/
test_visible.py fails when it is stale, when the reference fails a visible test, or when fewer than
80 % of the catalog are flagged.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
TARGET = 0.80  # share of the catalog a visible test must flag


def report_path(lab: str) -> Path:
    return ROOT / "autograder" / "audit" / "mutants" / f"{lab}_visible.json"


def digest(lab: str) -> str:
    """What the report depends on: the released notebook, the lab's source and its catalog."""
    h = hashlib.sha256()
    for path in (ROOT / "labs" / lab / f"{lab}.ipynb", ROOT / "solutions" / lab / f"{lab}.md",
                 ROOT / "autograder" / "audit" / "mutants" / f"{lab}.py"):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def graded_failures(nb: nbformat.NotebookNode, every_cell: bool = False) -> dict[str, str]:
    """Run the notebook's code cells in order in one namespace; grade id -> first line of the error, for
    every graded test cell that raised (a cell after a failing one still runs, as in Jupyter); with
    every_cell, for every cell that raised (the reference must run clean from top to bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    failures = {}
    namespace: dict = {"__name__": "__main__"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(cell.source, f"<cell {meta.get('grade_id')}>", "exec"), namespace)  # noqa: S102
        except BaseException as err:  # noqa: BLE001 - a student's cell may raise anything
            if isinstance(err, KeyboardInterrupt):
                raise
            if meta.get("grade") or every_cell:
                failures[meta.get("grade_id", "?")] = (f"{type(err).__name__}: "
                                                       f"{str(err).splitlines()[0] if str(err) else ''}")
    import matplotlib.pyplot as plt

    plt.close("all")
    return failures


def audit(lab: str, only: list[str] | None = None, progress: bool = True) -> dict:
    """The report: the reference's failing cells, any cell (none expected), and each mutant's failing
    graded cells."""
    import importlib

    from autograder.audit.mutants import make_submission

    catalog = importlib.import_module(f"autograder.audit.mutants.{lab}").MUTANTS
    release = nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)
    old = os.environ.get("NBGRADER_EXECUTION")
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # the notebook's own sweeps shrink, as under the grader
    try:
        start = time.monotonic()
        reference = graded_failures(make_submission(lab, release), every_cell=True)
        rows = []
        for m in catalog:
            if only and m.name not in only:
                continue
            failing = graded_failures(make_submission(lab, release, m))
            rows.append({"name": m.name, "part": m.part, "flagged": bool(failing), "failing_cells": sorted(failing),
                         "first_message": next(iter(failing.values()), "")[:200]})
            if progress:
                print(f"  {m.name}: {'flagged by ' + ', '.join(sorted(failing)) if failing else 'NOT flagged'}",
                      file=sys.stderr)
    finally:
        if old is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = old
    flagged = sum(r["flagged"] for r in rows)
    return {"lab": lab, "digest": digest(lab), "reference_failures": reference, "mutants": rows,
            "flagged": flagged, "total": len(rows), "share": flagged / len(rows) if rows else 0.0,
            "seconds": round(time.monotonic() - start, 1)}


def merged(committed: dict, fresh: dict, lab: str) -> dict:
    """fresh (a run with `only`) completed by the committed rows of the other mutants, in catalog order; a
    mutant with no row in either is an error."""
    import importlib

    rows = {r["name"]: r for r in committed["mutants"]} | {r["name"]: r for r in fresh["mutants"]}
    names = [m.name for m in importlib.import_module(f"autograder.audit.mutants.{lab}").MUTANTS]
    missing = [n for n in names if n not in rows]
    if missing:
        raise SystemExit(f"no committed row for {', '.join(missing)}: add them to --only")
    out = dict(fresh, mutants=[rows[n] for n in names])
    out["flagged"] = sum(r["flagged"] for r in out["mutants"])
    out["total"] = len(names)
    out["share"] = out["flagged"] / len(names)
    return out


def table(report: dict) -> str:
    lines = [f"**{report['lab']}**: {report['flagged']} of {report['total']} catalog mutants flagged by a visible "
             f"test ({report['share']:.0%}); the reference fails {len(report['reference_failures'])} visible tests.",
             "", "| mutant | part | flagged by a visible test | visible test cells that fail |", "|---|---|---|---|"]
    for r in report["mutants"]:
        lines.append(f"| `{r['name']}` | {r['part']} | {'yes' if r['flagged'] else '**no**'} | "
                     f"{', '.join(r['failing_cells']) or '—'} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab")
    parser.add_argument("--write", action="store_true", help="write the committed report")
    parser.add_argument("--check", action="store_true", help="compare with the committed report; compute nothing")
    parser.add_argument("--show", action="store_true", help="print the committed report's table")
    parser.add_argument("--only", nargs="+", help="recompute the reference and these mutants; every other "
                        "mutant's row is kept from the committed report (for a catalog that grew)")
    args = parser.parse_args(argv)
    path = report_path(args.lab)
    if args.check or args.show:
        if not path.exists():
            print(f"{path}: missing; run python -m autograder.audit.visible {args.lab} --write")
            return 1
        report = json.loads(path.read_text())
        if args.show:
            print(table(report))
        if args.check and report["digest"] != digest(args.lab):
            print(f"{path}: stale (the notebook, the lab source or the catalog changed); run "
                  f"python -m autograder.audit.visible {args.lab} --write")
            return 1
        return 0
    report = audit(args.lab, only=args.only)
    if args.only:
        report = merged(json.loads(path.read_text()) if path.exists() else {"mutants": []}, report, args.lab)
    print(table(report))
    if args.write:
        path.write_text(json.dumps(report, indent=1) + "\n")
        print(f"written {path}")
    ok = not report["reference_failures"] and report["share"] >= TARGET
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
