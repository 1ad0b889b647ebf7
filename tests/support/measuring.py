"""The pages that time, and the runner that executes one headless (tests/support/chapter_runner.py), shared by
tests/book/test_measuring_pages.py (`make test`) and the `fake_timers` audit (tests/audit/, `make audit`)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from speclab import measure

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "support" / "chapter_runner.py"
FAKES = list(measure.FAKE_KINDS)
TIMERS = re.compile(r"measure\.(time_interleaved|time_fn|time_ratio|forward_times|copy_bandwidth|matmul_throughput)\(|"
                    r"measurements\.live\(")
TIMER_IMPORT = re.compile(r"^from speclab\.measure import .*\b(time_interleaved|time_fn|time_ratio|forward_times)\b|"
                          r"speedtest\.(batch_speedup|decoder_speedup)\(", re.M)


def measuring_chapters() -> list[str]:
    """Pages of the book whose code calls one of speclab.measure's timers, or measures through
    speclab.measurements (which times with them)."""
    return sorted(p.name for p in (ROOT / "book").glob("*.md") if TIMERS.search(p.read_text()))


def measuring_labs() -> list[str]:
    """Labs (their MyST sources in solutions/, the reference's answers in place) whose cells time."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "solutions").glob("*/*.md")
                  if p.stem == p.parent.name and (TIMERS.search(p.read_text()) or TIMER_IMPORT.search(p.read_text())))


def measuring_pages() -> list[str]:
    """Every page a reader or a student executes that times: book chapters by name, labs by path."""
    return measuring_chapters() + measuring_labs()


def page_path(page: str) -> Path:
    return ROOT / page if "/" in page else ROOT / "book" / page


def run_chapter(path: Path, out: Path, fakes: list[str] = (), timeout: float = 1500) -> dict:
    args = [sys.executable, str(RUNNER), str(path), str(out)]
    if fakes:
        args += ["--fakes", ",".join(fakes)]
    if path.is_relative_to(ROOT / "solutions"):  # a lab: what the student runs, the hidden checks cut out
        args += ["--without-hidden-tests"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if not out.exists():
        raise AssertionError(f"the runner wrote no report for {path.name}:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())
