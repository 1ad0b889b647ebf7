"""Wall time of the REAL `nbgrader autograde` on one reference submission: `python -m autograder.time_grading lab1`.

A throw-away course in a temporary folder uses the repository's nbgrader configuration and
solutions/; the release is generated, the reference solution is handed in as one student's
notebook, and `nbgrader autograde` runs on it alone. Prints the wall time, the load average
of the machine at the start and at the end (a shared machine slows everything alike), and
the scores per graded cell. Notation: see the `speclab` package docstring.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.mutants import make_submission

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _nbgrader(course: Path, *args: str) -> None:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def time_reference(lab: str) -> tuple[float, dict]:
    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        (course / "nbgrader_config.py").write_text(
            "c = get_config()\n"
            f"load_subconfig({str(ROOT / 'autograder' / 'nbgrader_config.py')!r})\n")
        (course / "solutions").symlink_to(ROOT / "solutions", target_is_directory=True)
        _nbgrader(course, "generate_assignment", lab, "--force")
        release = nbformat.read(course / "labs" / lab / f"{lab}.ipynb", as_version=4)
        path = course / "submitted" / "reference" / lab / f"{lab}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(make_submission(lab, release), path)
        t0 = time.perf_counter()
        _nbgrader(course, "autograde", lab, "--force", "--student=reference")
        seconds = time.perf_counter() - t0
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            nb = gb.find_submission_notebook(lab, lab, "reference")
            scores = {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}
    return seconds, scores


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lab")
    args = parser.parse_args(argv)
    load0 = os.getloadavg()[0]
    seconds, scores = time_reference(args.lab)
    got = sum(s for s, _ in scores.values())
    top = sum(m for _, m in scores.values())
    print(f"{args.lab}: nbgrader autograde of the reference submission took {seconds:.1f} s "
          f"(load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} cores); "
          f"score {got:g} / {top:g}")
    for name, (s, m) in scores.items():
        print(f"  {name:28s} {s:g} / {m:g}")
    return 0 if got == top else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
