"""A live figure whose timings stayed unstable is marked so on the page, next to the number (issue 51, item 3).

The code that writes each live figure is cut out of its chapter's MyST source and run on stand-in measurements:
the same timings once stable and once with one timing unstable (an interquartile range above
speclab.timing.MAX_REL_IQR of the median). A mark that went missing, or one shown on stable timings, fails.
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from speclab import measurements
from speclab.timing import MAX_REL_IQR

ROOT = Path(__file__).resolve().parents[2]


def cell_code(page: str, marker: str) -> str:
    """The code cell of book/<page> that contains marker."""
    nb = jupytext.read(ROOT / "book" / page)
    (code,) = [c.source for c in nb.cells if c.cell_type == "code" and marker in c.source]
    return code


def timing(stable: bool) -> dict:
    return {"median": 1e-3, "stable": stable, "rel_iqr": 0.02 if stable else 3 * MAX_REL_IQR}


def run_of(labels: dict[str, list[str]], unstable: tuple[str, str] | None = None) -> dict:
    return {group: {"timings": {label: timing((group, label) != unstable) for label in names}}
            for group, names in labels.items()}


CH1_LABELS = {"roofs": ["copy 96 MiB", "matmul"], "rows": ["m=1", "m=2", "m=128"],
              "passes": ["target m=1", "target m=5"]}


@pytest.mark.parametrize("unstable, marked_row", [(None, None), (("rows", "m=1"), 0),
                                                  (("passes", "target m=5"), 4), (("roofs", "matmul"), "all")])
def test_chapter_1_marks_the_roofline_cells_of_unstable_timings(unstable, marked_row):
    code = cell_code("01_memory_bound.md", "def unstable(run, i)")
    code = code[code.index("# the timings behind each point"):]  # the table, from the points already computed
    shown, printed = [], []
    names = ["XW, m = 1", "XW, m = 128", "square matmul", "target forward, m = 1", "target forward, m = 5"]
    ns = {"runs": {"reference": run_of(CH1_LABELS), "this build": run_of(CH1_LABELS, unstable)},
          "points": {run: [(name, 1.0, 2e9) for name in names] for run in ("reference", "this build")},
          "share": {run: [50.0] * 5 for run in ("reference", "this build")},
          "m_rows": [1, 2, 128], "K_DRAFT": 4, "measurements": measurements,
          "Markdown": lambda text: text, "display": shown.append, "print": lambda *a, **k: printed.append(a)}
    exec(code, ns)
    rows = shown[0].splitlines()[2:]
    marks = [row.count("(unstable)") for row in rows]
    if marked_row is None:
        assert marks == [0] * 5 and not printed
    elif marked_row == "all":  # a roof behind every point
        assert marks == [1] * 5 and printed
    else:
        assert marks == [int(i == marked_row) for i in range(5)] and printed
    assert all(row.split("|")[3].count("(unstable)") == 0 for row in rows)  # the reference run's column


@pytest.mark.parametrize("stable", [True, False])
def test_chapter_1_says_when_this_builds_roofs_are_unstable(stable):
    code = cell_code("01_memory_bound.md", "roofs_words = ")
    code = code[code.index("ridge_ratio = "):]
    ns = {"F": {"reference": 2.0, "this build": 2.0}, "B": {"reference": 1.0, "this build": 1.0},
          "runs": {"this build": run_of(CH1_LABELS, None if stable else ("roofs", "copy 96 MiB"))},
          "measurements": measurements}
    exec(code, ns)
    assert ("not reliable" in ns["roofs_words"]) != stable


@pytest.mark.parametrize("stable", [True, False])
def test_chapter_7_marks_this_builds_costs(stable):
    code = cell_code("07_machines.md", "shaky = ")
    code = code[code.index("# a run's costs are marked"):code.index("for run, s in cost.items()")]
    labels = {"passes": ["target m=1", "target m=9", "draft m=1"]}
    ns = {"runs": {"reference": run_of(labels), "this build": run_of(labels, None if stable
                                                                     else ("passes", "draft m=1"))},
          "measurements": measurements}
    exec(code, ns)
    assert ns["mark"]["reference"] == ""
    assert ns["mark"]["this build"] == ("" if stable else " (unstable)")
    # both tables of the chapter print the mark beside this build's figures
    text = (ROOT / "book" / "07_machines.md").read_text()
    assert len(re.findall(r"mark\[.this build.\]", text)) >= 2


@pytest.mark.parametrize("stable", [True, False])
def test_chapter_9_says_when_its_live_figure_is_unstable(stable):
    code = cell_code("09_mistakes.md", 'put("ch9_m8_live"')
    put = {}
    labels = {"x": ["target m=1", "target m=5"]}
    live = run_of(labels, None if stable else ("x", "target m=5"))["x"]
    ns = {"put": put.__setitem__, "v4": {"reference": 1.5, "this build": 1.6},
          "passes": {"this build": live}, "nb": type("B", (), {"weights": 9, "total": 10})(),
          "measurements": measurements}
    exec(code, ns)
    assert ("not a reliable figure" in put["ch9_m8_live"]) != stable
    assert (measurements.UNSTABLE_MEANS in put["ch9_m8_live"]) != stable


def test_the_one_rule_names_the_unstable_timings_among_those_asked():
    run = run_of({"passes": ["target m=1", "target m=5", "draft m=1"]}, ("passes", "draft m=1"))["passes"]
    assert measurements.unstable(run) == ["draft m=1"]
    assert measurements.unstable(run, ["target m=1", "target m=5"]) == []
    assert measurements.unstable(run, ["draft m=1"]) == ["draft m=1"]
    assert f"{100 * MAX_REL_IQR:.0f} %" in measurements.UNSTABLE_MEANS
