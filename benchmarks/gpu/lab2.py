"""What the GPU report needs of Lab 2: its reference decoders, and its grade under nbgrader.

Notation: see the `speclab` package docstring (p = target, q = draft, k = draft length).

The only part of benchmarks/gpu/ that reads the grader's authoring tools (the reference
solution, a filled-in submission); `speclab` itself imports nothing of `autograder`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

__all__ = ["REPO", "lab2_autograde", "load_lab2_reference"]

REPO = Path(__file__).resolve().parents[2]
DECODERS = ("speculative_decode", "autoregressive_decode")


def _reference():
    """The grader's reference loader: `reference.load(lab)` runs solutions/<lab>/<lab>.md's solution cells."""
    from autograder.authoring import reference

    return reference


def _make_submission():
    """The grader's `make_submission(lab, release_nb)`: the release notebook with the reference filled in."""
    from autograder.audit.mutants import make_submission

    return make_submission


def load_lab2_reference() -> dict:
    """The namespace of the Lab 2 reference solution: speculative_decode, autoregressive_decode and
    their helpers, executed from the solution source the students' release is built from."""
    threads = torch.get_num_threads()  # the lab's set-up cell pins one CPU thread; keep ours
    try:
        module = _reference().load("lab2")
    finally:
        torch.set_num_threads(threads)
    missing = [name for name in DECODERS if not hasattr(module, name)]
    if missing:
        raise RuntimeError(f"the Lab 2 reference solution defines no {', '.join(missing)}")
    return dict(vars(module))


def _nbgrader() -> Path:
    """The venv's nbgrader, else the one on PATH (a bare GPU image: /tmp/site/bin, from `make gpu-wheels`)."""
    here = Path(sys.executable).parent / "nbgrader"
    if here.exists():
        return here
    found = shutil.which("nbgrader")
    if found is None:
        raise FileNotFoundError("nbgrader not found: install it, or on a bare GPU image carry `make gpu-wheels`'s .whl/")
    return Path(found)


def lab2_autograde(timeout_s: float = 1800.0, repo: Path | None = None) -> dict:
    """Autograde the Lab 2 reference solution with the real `nbgrader autograde`: a throw-away course
    that loads the course's nbgrader configuration, the release generated from solutions/lab2, the
    reference submitted as one student. repo: the course checkout (default: this one).

    Never raises: a failure (the lab being restructured, nbgrader missing) comes back as
    {"points": None, "total": None, "seconds": ..., "error": "..."}.
    """
    repo = REPO if repo is None else Path(repo)
    t0 = time.perf_counter()
    try:
        import nbformat

        config = repo / "autograder" / "inside" / "nbgrader_config.py"
        for path in (repo / "solutions" / "lab2", config):
            if not path.exists():
                raise FileNotFoundError(f"{path} is missing: the lab sources moved?")
        nbgrader = _nbgrader()
        with tempfile.TemporaryDirectory(prefix="lab2-gpu-") as tmp:
            from autograder.pipeline.config import write_course  # the one helper for a throw-away course

            root = write_course(Path(tmp), repo, link_solutions=True)
            env = dict(os.environ, PATH=f"{nbgrader.parent}{os.pathsep}{os.environ.get('PATH', '')}",
                       PYTHONPATH=os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))

            def run(*args: str) -> None:
                proc = subprocess.run([str(nbgrader), *args], cwd=root, env=env, capture_output=True, text=True,
                                      timeout=timeout_s)
                if proc.returncode != 0:
                    raise RuntimeError(f"nbgrader {' '.join(args)} failed: {proc.stderr[-2000:]}")

            run("generate_assignment", "lab2", "--force")
            release = nbformat.read(root / "labs" / "lab2" / "lab2.ipynb", as_version=4)
            sub = root / "submitted" / "reference" / "lab2" / "lab2.ipynb"
            sub.parent.mkdir(parents=True)
            nbformat.write(_make_submission()("lab2", release), sub)
            t_grade = time.perf_counter()
            run("autograde", "lab2", "--force", "--student=reference")
            seconds = time.perf_counter() - t_grade
            from nbgrader.api import Gradebook

            with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
                nb = gb.find_submission_notebook("lab2", "lab2", "reference")
                cells = {g.name: [float(g.score), float(g.max_score)] for g in nb.grades}
        return {"points": sum(s for s, _ in cells.values()), "total": sum(m for _, m in cells.values()),
                "seconds": seconds, "cells": cells}
    except Exception as err:  # noqa: BLE001 -- the report must survive a broken lab
        return {"points": None, "total": None, "seconds": time.perf_counter() - t0,
                "error": f"{type(err).__name__}: {err}"[:3000]}
