"""Stage 1, collect (autograder/pipeline/collect.py): every accepted layout, and what is refused."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from autograder.pipeline.collect import check_notebooks, collect, submission_hash

NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _write(path: Path, text: str = NB) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("layout", ["submitted/{s}/lab1/lab1.ipynb", "{s}/lab1/lab1.ipynb", "{s}/lab1.ipynb",
                                    "{s}__lab1.ipynb"])
def test_every_layout_gives_one_folder_per_student(tmp_path, layout):
    subs = tmp_path / "subs"
    for s in ("alice", "bob"):
        _write(subs / layout.format(s=s))
    found = collect(subs, "lab1", tmp_path / "out")
    assert list(found) == ["alice", "bob"]
    for folder in found.values():
        assert [p.name for p in folder.rglob("*.ipynb")] == ["lab1.ipynb"]


def test_a_zip_is_unpacked_and_paths_out_of_it_are_dropped(tmp_path):
    z = tmp_path / "class.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("alice__lab1.ipynb", NB)
        zf.writestr("../evil__lab1.ipynb", NB)
    found = collect(z, "lab1", tmp_path / "out")
    assert list(found) == ["alice"]
    assert not (tmp_path / "evil__lab1.ipynb").exists()


def test_student_ids_that_could_name_a_path_are_refused(tmp_path):
    _write(tmp_path / "subs" / "-rf" / "lab1.ipynb")
    with pytest.raises(SystemExit, match="student ids must match"):
        collect(tmp_path / "subs", "lab1", tmp_path / "out")


def test_the_hash_changes_with_any_file_and_only_then(tmp_path):
    folder = tmp_path / "alice"
    nb = _write(folder / "lab1.ipynb")
    first = submission_hash(folder)
    assert submission_hash(folder) == first
    nb.write_text(NB + " ")
    assert submission_hash(folder) != first


def test_check_notebooks_says_what_is_wrong(tmp_path):
    folder = tmp_path / "alice"
    _write(folder / "lab1 (2).ipynb")  # an LMS's renaming: graded, with a note
    usable, problems = check_notebooks(folder, ["lab1"], 1 << 20)
    assert list(usable) == ["lab1"] and "graded the only notebook handed in" in problems[0]
    _write(folder / "lab1.ipynb", "{not json")
    usable, problems = check_notebooks(folder, ["lab1"], 1 << 20)
    assert usable == {} and any("not a valid notebook" in p for p in problems)
    _write(folder / "lab1.ipynb", NB + " " * 2000)
    usable, problems = check_notebooks(folder, ["lab1"], 1000)
    assert usable == {} and any("larger than" in p for p in problems)
    usable, problems = check_notebooks(tmp_path / "nobody", ["lab1"], 1 << 20)
    assert usable == {} and problems == ["lab1.ipynb: missing (0 points for its cells)"]
