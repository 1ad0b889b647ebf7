"""A class graded in shards merges to what one run writes (autograder/pipeline/shards.py, issue 52).

The tiny lab, a class of six downloaded from Canvas (a zip of flat files, so the LMS import file is merged too):
three full solutions, two that solve only `add`, one broken notebook. It is graded once in one run, and once in
three shards by hand, the middle shard killed after its first student and started again; `merge` then writes
the same grades.csv, Canvas import and lms.csv, byte for byte, and the same feedback pages. A shard graded
again by other grading code makes `merge` refuse, naming the versions; so does a missing or unfinished shard.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest

import grading_fixtures as F
from autograder.pipeline import Config, build_template, grade_class, summary
from autograder.pipeline import shards
from autograder.sandbox import Limits
from released import seed_template  # one release of a lab per test process (tests/support/released.py)

pytestmark = pytest.mark.slow
LIMITS = Limits(cell_timeout_s=30, notebook_timeout_s=120, memory_mb=3072, file_mb=200, output_kb=64)
SUPPORT = Path(__file__).resolve().parents[2] / "support"
CLASS = {  # Canvas's flat file name -> what the student handed in
    "lovelaceada_101_9001_tiny.ipynb": F.SOLUTION, "turingalan_102_9002_tiny.ipynb": F.SOLUTION,
    "hopper_late_103_9003_tiny.ipynb": F.SOLUTION, "noetheremmy_104_9004_tiny.ipynb": F.HALF,
    "babbagecharles_105_9005_tiny.ipynb": F.HALF, "gaussfriedrich_106_9006_tiny.ipynb": None,  # not JSON
}
RUN_SHARD = f"""
import sys
sys.path[:0] = [{str(SUPPORT)!r}]
import grading_fixtures as F
from pathlib import Path
from autograder.pipeline import Config, grade_class
from autograder.sandbox import Limits
limits = Limits(cell_timeout_s=30, notebook_timeout_s=120, memory_mb=3072, file_mb=200, output_kb=64)
cfg = Config(F.LAB, Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), workers=1, limits=limits,
             lab_checks=F.LAB_CHECKS, shard=(int(sys.argv[4]), int(sys.argv[5])))
print("graded", len(grade_class(cfg, progress=False)), flush=True)
"""


def test_a_shard_is_written_I_slash_N_and_the_shards_split_the_class():
    assert shards.parse("2/5") == (2, 5)
    for bad in ("5/5", "-1/3", "1", "a/b", "0/0"):
        with pytest.raises(ValueError, match="--shard"):
            shards.parse(bad)
    students = [f"s{i:02d}" for i in range(17)]
    parts = [shards.members(list(reversed(students)), i, 4) for i in range(4)]
    assert sorted(s for p in parts for s in p) == students  # every student once, whatever order they came in
    assert [len(p) for p in parts] == [5, 4, 4, 4]


def _zip(base: Path, release) -> Path:
    z = base / "canvas.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for name, solution in CLASS.items():
            zf.writestr(name, nbformat.writes(F.student(release, solution)) if solution else "{ not a notebook")
    return z


def _grade_shard_killed_after_one(args: list[str], results: Path) -> None:
    """Start a shard in a process of its own, kill its whole process group once it wrote one result."""
    import os
    import signal

    run = subprocess.Popen(args, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while not any(results.glob("*.json")) and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.05)
    assert run.poll() is None, run.stdout.read().decode()[-3000:]  # killed halfway, not after it finished
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(60)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("shards")
    course = F.make_course(base / "course")
    single = Config(F.LAB, base / "canvas.zip", base / "single", course, workers=2, limits=LIMITS,
                    lab_checks=F.LAB_CHECKS)
    seed_template(single)
    build_template(single)
    release = nbformat.read(single.out / "template" / "labs" / F.LAB / f"{F.LAB}.ipynb", as_version=4)
    _zip(base, release)
    one = {r["student"]: r for r in grade_class(single, progress=False)}
    out = base / "sharded"
    for i in range(3):  # shard 1 is graded by another process, from the same folder
        seed_template(replace(single, out=out, shard=(i, 3)))
    for i in (0, 2):
        grade_class(replace(single, out=out, shard=(i, 3)), progress=False)
    args = [sys.executable, "-c", RUN_SHARD, str(single.submissions), str(out), str(course), "1", "3"]
    _grade_shard_killed_after_one(args, shards.shard_out(out, 1, 3) / "results")
    assert shards.Manifest.read(shards.shard_out(out, 1, 3)) is None  # stopped halfway: not finished
    with pytest.raises(shards.Refused, match="1 of 3 shards not finished.*--shard 1/3"):
        shards.merge_shards(out, course)
    again = subprocess.run(args, capture_output=True, text=True, timeout=600)  # the same command resumes it
    assert again.returncode == 0 and "graded 2" in again.stdout, again.stdout[-2000:] + again.stderr[-3000:]
    merged = shards.merge_shards(out, course)
    return single, one, out, merged


def test_the_merged_shards_write_what_one_run_writes(graded):
    single, one, out, (cfg, layout, merged) = graded
    said = summary(cfg, layout, merged).replace(str(out.resolve()), "OUT")
    assert said == summary(single, layout, list(one.values())).replace(str(single.out.resolve()), "OUT")
    assert "6 students graded" in said
    assert {r["student"]: r["score"] for r in merged} == {s: r["score"] for s, r in one.items()}
    assert sorted(r["score"] for r in merged) == [0, 2, 2, 5, 5, 5]
    for name in ("grades.csv", "grades_canvas.csv", "lms.csv"):
        assert (out / name).read_bytes() == (single.out / name).read_bytes(), name
    pages = sorted(p.relative_to(single.out / "feedback") for p in (single.out / "feedback").rglob("*.html"))
    assert len(pages) == 6
    assert sorted(p.relative_to(out / "feedback") for p in (out / "feedback").rglob("*.html")) == pages
    # each page's CSP nonce is drawn afresh when it is written, on purpose (a nonce a student could predict would
    # let a script through): the pages are the same but for it
    nonce = re.compile(rb"nonce(=\"|-)[0-9a-f]{32}")
    different = [p for p in pages if nonce.sub(b"NONCE", (single.out / "feedback" / p).read_bytes())
                 != nonce.sub(b"NONCE", (out / "feedback" / p).read_bytes())]
    assert not different, different
    assert nonce.search((out / "feedback" / pages[0]).read_bytes())  # the mask found what it hides


def test_the_killed_shard_graded_each_of_its_students_once_more_at_most(graded):
    _, _, out, _ = graded
    m = shards.Manifest.read(shards.shard_out(out, 1, 3))
    assert m is not None and m.students == ["gaussfriedrich_106", "noetheremmy_104"]


def test_a_shard_graded_by_other_code_is_refused(graded, tmp_path):
    """Shard 2 graded again after its lab's checks changed (a comment added): its results carry another version."""
    import shutil

    single, _, out, _ = graded
    copy = tmp_path / "sharded"
    shutil.copytree(out, copy, symlinks=True)
    checks = tmp_path / "checks"
    shutil.copytree(F.TINY, checks)
    (checks / "tiny.py").write_text((checks / "tiny.py").read_text() + "\n# edited after shards 0 and 1 were graded\n")
    grade_class(replace(single, out=copy, shard=(2, 3), lab_checks=(checks,), force=True), progress=False)
    with pytest.raises(shards.Refused, match="different grading code") as refused:
        shards.merge_shards(copy, single.course_root)
    said = str(refused.value)
    versions = dict(reversed(part.split(" in ", 1)) for part in said.split("(", 1)[1].split(")")[0].split("; "))
    assert versions.keys() == {"shard 0, shard 1", "shard 2"}, said
    assert len(set(versions.values())) == 2, said


def test_shards_of_another_class_or_a_missing_shard_are_refused(graded, tmp_path):
    import json
    import shutil

    single, _, out, _ = graded
    copy = tmp_path / "sharded"
    shutil.copytree(out, copy, symlinks=True)
    manifest = shards.shard_out(copy, 0, 3) / shards.MANIFEST
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "class_sha256": "0" * 64}))
    with pytest.raises(shards.Refused, match="different classes"):
        shards.merge_shards(copy, single.course_root)
    shutil.rmtree(shards.shard_out(copy, 0, 3))
    with pytest.raises(shards.Refused, match="1 of 3 shards not finished.*--shard 0/3"):
        shards.merge_shards(copy, single.course_root)
