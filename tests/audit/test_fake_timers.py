"""Audit `fake_timers` (`make audit fake_timers`): every measuring cell survives any measurement.

- Every chapter that times (found by scanning book/ for speclab's timers) and every lab that times (its source in
  solutions/, with the reference's answers and the hidden checks cut out: what a student runs) is executed
  headless once per FakeStopwatch kind (noise x10, reversed order, all equal, tiny, huge, zero); no cell may
  raise and no progress bar may reach the page. The harness's own power (a fragile page it must catch) is
  tested in `make test` (tests/book/test_measuring_pages.py).
- A measuring chapter runs on the real clock while two busy-loop processes keep both cores of a 2-core machine
  busy (bounded, the loops always killed).

The chapters run as subprocesses (tests/support/chapter_runner.py), two at a time; one kernel per chapter serves
every fake, so the imports are paid once.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from measuring import FAKES, measuring_chapters, measuring_pages, page_path, run_chapter

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- chapters under fakes
@pytest.fixture(scope="module")
def adversarial_reports(tmp_path_factory) -> dict[str, dict]:
    """Run every measuring chapter and lab under every fake, two at a time (the slowest first)."""
    out = tmp_path_factory.mktemp("adversarial")
    pages = sorted(measuring_pages(), key=lambda page: "lab2" not in page)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = pool.map(lambda page: run_chapter(page_path(page), out / f"{Path(page).name}.json", FAKES), pages)
        return dict(zip(pages, reports))


@pytest.mark.slow
@pytest.mark.parametrize("chapter", measuring_pages())
def test_chapter_survives_every_fake_timer(adversarial_reports, chapter):
    report = adversarial_reports[chapter]
    table = "\n".join(f"{chapter} x {p['fake']:>8} -> {'passed' if p['ok'] else 'FAILED'}"
                      f" ({p['fake_calls']} fake timings)" for p in report["passes"])
    print(table)
    failed = [p for p in report["passes"] if not p["ok"]]
    assert not failed and not report["fatal"], (
        table + "\n\n" + "\n\n".join(f"under {p['fake']}:\n{p['error']}" for p in failed) + report["fatal"])
    assert [p["fake"] for p in report["passes"]] == FAKES
    assert all(p["fake_calls"] > 0 for p in report["passes"])
    assert not report["widgets"], f"progress output would reach the page: {report['widgets']}"


# ------------------------------------------------------------------------- under load
# The chapter run under load: the one that times the memory bus, the measurement most sensitive to other
# processes. Every measuring chapter runs on the real clock in the book's build and under every fake timer above.
LOADED_CHAPTERS = ["01_memory_bound.md"]


@pytest.mark.slow
def test_measuring_chapter_on_a_loaded_machine(tmp_path):
    """Two busy loops (autograder.audit.timing_load.busy_loops: bounded, always killed) keep both cores of
    a 2-core machine busy while a measuring chapter (LOADED_CHAPTERS) runs on the real clock. No cell may
    raise and no progress bar may reach a page. (The Lab 2 reference's timed cells under the same load:
    tests/end_to_end/test_lab2_class.py; their false-failure rate: `python -m autograder.audit.timing_load`.)"""
    from autograder.audit.timing_load import busy_loops

    chapters = LOADED_CHAPTERS
    assert set(chapters) <= set(measuring_chapters())
    with busy_loops(2, seconds=1800) as busy:
        t0 = time.monotonic()
        reports = {ch: run_chapter(ROOT / "book" / ch, tmp_path / f"{ch}.json", timeout=1200) for ch in chapters}
        assert all(p.poll() is None for p in busy), "the busy loops stopped before the measurements were done"
        elapsed = time.monotonic() - t0
    assert all(p.poll() is not None for p in busy)
    for ch, report in reports.items():
        (only,) = report["passes"]
        assert only["ok"] and not report["fatal"], f"{ch} failed under load:\n{only['error']}{report['fatal']}"
        assert not report["widgets"], f"{ch}: progress output would reach the page: {report['widgets']}"
    print(f"under two busy loops ({elapsed:.0f} s): " + ", ".join(f"{ch} {r['seconds']:.0f} s" for ch, r in reports.items()))
