"""autograder/README.md's table of what a student costs shows the `throughput` audit's committed report.

The table is written by hand from `autograder/audit/reports/throughput.json`; when the audit is rerun, the
report changes and this test names the cells the README must follow (it once kept figures two reruns old).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COLUMNS = ("students_per_hour_here", "untimed_worker_s_per_student", "timed_slot_s_per_student",
           "students_per_hour_one_host", "one_host_h", "cluster_h")


def readme_rows() -> dict[str, list[float]]:
    """lab -> the six figures of its row in the README's table."""
    rows = {}
    for line in (ROOT / "autograder" / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and re.fullmatch(r"lab\d", cells[0]):
            rows[cells[0]] = [float(c.replace(",", "").removesuffix(" h")) for c in cells[1:]]
    return rows


def test_the_readme_table_shows_the_throughput_report():
    report = json.loads((ROOT / "autograder" / "audit" / "reports" / "throughput.json").read_text())
    rows = readme_rows()
    assert set(rows) == set(report["figures"]["throughput"]), rows
    wrong = []
    for lab, shown in rows.items():
        figures = report["figures"]["throughput"][lab]
        for column, value in zip(COLUMNS, shown):
            # the README rounds students per hour to whole students, the rest as the report does
            expected = round(figures[column]) if column.startswith("students_per_hour") else figures[column]
            if value != expected:
                wrong.append(f"{lab} {column}: README {value}, report {expected}")
    assert not wrong, "autograder/README.md's throughput table is not the report's:\n" + "\n".join(wrong)
