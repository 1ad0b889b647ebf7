"""The measurements the book shows: once per build, shared by the chapters, beside a committed reference.

Unit tests of `speclab.measurements` run a cheap stand-in quantity (no model is timed), so their
verdicts depend on what is stored and read, never on this machine's speed. The build test reads
the fresh build's measurement file and pages: one measurement of the target's passes, read by
chapters 1, 7 and 9, which all print the same v(4) for this build.
"""
from __future__ import annotations

import json
import re
import sys
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup

from bookpages import ROOT
from speclab import measure, measurements

REQUIRED = {"what", "timings", "values", "stable", "notes", "measured_at", "load_average", "machine"}


@pytest.fixture
def counted(monkeypatch):
    """A stand-in quantity "tiny" that counts how often it is measured (one trivial timing)."""
    calls = []

    def tiny(budget):
        calls.append(budget)
        (t,) = measure.time_interleaved([lambda: None], ["noop"], repeats=3, warmup=1)
        return {"timings": [t], "sizes": None, "values": {"n": len(calls)}}

    monkeypatch.setitem(measurements.QUANTITIES, "tiny", ("a no-op", tiny, ("00_test",)))
    monkeypatch.setattr(measurements, "_IN_PROCESS", {})
    return calls


def test_a_quantity_is_measured_once_per_build_and_shared(counted, tmp_path, monkeypatch):
    store = tmp_path / "live.json"
    monkeypatch.setenv(measurements.LIVE_ENV, str(store))
    first = measurements.live("tiny", "01_memory_bound")
    again = measurements.live("tiny", "09_mistakes")
    assert len(counted) == 1 and first == again and first["values"] == {"n": 1}
    data = json.loads(store.read_text())
    assert REQUIRED <= set(data["quantities"]["tiny"])
    assert data["pages"] == {"01_memory_bound": ["tiny"], "09_mistakes": ["tiny"]}


def test_without_a_build_file_a_kernel_measures_once(counted, monkeypatch):
    monkeypatch.delenv(measurements.LIVE_ENV, raising=False)
    measurements.live("tiny", "a")
    measurements.live("tiny", "a")
    assert len(counted) == 1


def test_under_a_fake_stopwatch_nothing_is_stored_or_reused(counted, tmp_path, monkeypatch):
    store = tmp_path / "live.json"
    monkeypatch.setenv(measurements.LIVE_ENV, str(store))
    with measure.use_stopwatch(measure.FakeStopwatch("reversed")):
        measurements.live("tiny", "a")
        measurements.live("tiny", "a")
    assert len(counted) == 2 and not store.exists()


def test_an_unknown_quantity_is_refused():
    with pytest.raises(KeyError, match="unknown quantity"):
        measurements.live("bandwidth of the moon", "a")


def test_the_committed_reference_says_where_when_and_how_it_was_measured():
    ref = measurements.reference()
    assert ref["command"].startswith("python benchmarks/cpu_reference.py") and ref["written_at"]
    assert set(ref["quantities"]) == set(measurements.QUANTITIES)
    for name, result in ref["quantities"].items():
        assert REQUIRED | {"quiet", "attempts"} <= set(result), name
        assert result["machine"]["device"] and result["measured_at"] and result["load_average"]["before"], name
    assert measurements.describe_run(ref["quantities"]["passes"]).startswith(ref["quantities"]["passes"]["machine"]["device"])


def test_the_extension_drops_the_measurements_with_the_execution_cache(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import speclab_book

    app = SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))
    config = SimpleNamespace(nb_execution_cache_path="")
    store = speclab_book.live_measurements_path(app)
    store.parent.mkdir(parents=True)
    store.write_text("{}")
    monkeypatch.delenv(measurements.LIVE_ENV, raising=False)
    (tmp_path / "_build" / ".jupyter_cache").mkdir()
    speclab_book.start_live_measurements(app, config)
    assert store.exists(), "a build with a cache keeps the measurements its cached pages show"
    (tmp_path / "_build" / ".jupyter_cache").rmdir()
    speclab_book.start_live_measurements(app, config)
    assert not store.exists(), "a build without a cache starts without measurements"
    import os

    assert os.environ[measurements.LIVE_ENV] == str(store)


@pytest.mark.slow
def test_the_build_measured_the_targets_passes_once_for_three_chapters(book_out, html_root):
    live = json.loads((book_out / "_build" / ".speclab" / "live-measurements.json").read_text())
    assert {page for page, names in live["pages"].items() if "passes" in names} == {
        "01_memory_bound", "07_machines", "09_mistakes"}
    shown = {}
    for chapter in ("01_memory_bound", "07_machines", "09_mistakes"):
        text = BeautifulSoup((html_root / "book" / f"{chapter}.html").read_text(), "html.parser").get_text(" ")
        found = re.findall(r"this build: .*?v\(4\) = (?:T_target\(5\)/T_target\(1\) = )?([0-9.]+)", text)
        assert found, chapter
        shown[chapter] = found[0]
    assert len(set(shown.values())) == 1, shown
