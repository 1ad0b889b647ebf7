"""Grading time of one lab's reference submission, with the sandbox and without it (--unsafe).

    .venv/bin/python tests/grading_time.py lab1    # or lab2; prints one JSON line per mode

The reference (solutions/<lab>/<lab>.ipynb) is graded by the real pipeline, one worker,
`--force`, first in the sandbox then with `unsafe=True` (same verdict, no sandbox); the
per-student time is the pipeline's own `seconds` (autograde + the grader's verdict +
publishing). Both runs happen one after the other on the same machine; on a shared machine
repeat the command and compare the ratio, not the absolute times.
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from autograder.pipeline import REPO_ROOT, Config, grade_class


def grade_reference(lab: str, unsafe: bool, base: Path) -> dict:
    subs = base / "subs" / "ref" / lab
    subs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_ROOT / "solutions" / lab / f"{lab}.ipynb", subs / f"{lab}.ipynb")
    cfg = Config(lab, base / "subs", base / "out", REPO_ROOT, workers=1, force=True, unsafe=unsafe)
    t0 = time.perf_counter()
    r = grade_class(cfg, progress=False)[0]
    return {"lab": lab, "sandbox": not unsafe, "score": r["score"], "max_score": r["max_score"],
            "seconds_per_student": r["seconds"], "run_wall_s": round(time.perf_counter() - t0, 1),
            "problems": r["problems"]}


if __name__ == "__main__":
    lab = sys.argv[1] if len(sys.argv) > 1 else "lab1"
    with tempfile.TemporaryDirectory(prefix=f"grading-time-{lab}-") as tmp:
        for unsafe in (False, True):
            print(json.dumps(grade_reference(lab, unsafe, Path(tmp) / ("unsafe" if unsafe else "sandbox"))),
                  flush=True)
