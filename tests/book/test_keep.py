"""A book to keep: its version, how to cite it, its changelog, bibliography, index and execution report.

The version is the package's (pyproject.toml); CITATION.cff and the changelog must say the same,
and the built book shows it (every page's footer, the front page's citation). The bibliography
page lists every work with the same author-year labels the text cites them by, the index has
entries, and the execution report has a row for every executed page, saying whether the
measurements a page shows passed their checks.
"""
from __future__ import annotations

import re
import tomllib

import pytest
import yaml
from bs4 import BeautifulSoup

import speclab
from bookpages import ROOT, chapter_pages

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_citation_and_changelog_name_the_packages_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"] and cff["authors"] and cff["message"]
    assert cff["version"] == VERSION == speclab.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(VERSION)}\]", changelog, re.M), "the changelog has no entry for this version"
    assert re.search(r"^## \[Unreleased\]", changelog, re.M) or changelog.index(f"[{VERSION}]") < 200
    # the citation's year: the date the changelog gives this version
    released = re.search(rf"^## \[{re.escape(VERSION)}\] - (\d{{4}}-\d{{2}}-\d{{2}})", changelog, re.M)
    assert released and str(cff.get("date-released")) == released.group(1), "CITATION.cff's date-released"


@pytest.mark.slow
def test_every_page_shows_the_version_and_the_front_page_how_to_cite(html_root):
    for page in chapter_pages(html_root):
        footer = BeautifulSoup(page.read_text(), "html.parser").select_one(".speclab-version")
        assert footer is not None and f"speclab {VERSION}" in footer.get_text(), page.name
    intro = " ".join(BeautifulSoup((html_root / "book" / "intro.html").read_text(), "html.parser").get_text(" ").split())
    assert f"version {VERSION}" in intro and "@software{speclab" in intro
    year = str(yaml.safe_load((ROOT / "CITATION.cff").read_text())["date-released"])[:4]
    assert re.search(r"year\s*=\s*" + re.escape("{" + year + "}"), intro), "the front page's citation has no year"


@pytest.mark.slow
def test_bibliography_labels_match_the_citations(html_root):
    bib = BeautifulSoup((html_root / "book" / "bibliography.html").read_text(), "html.parser")
    labels = [el.get_text().strip("[] ") for el in bib.select("div.citation span.label, dl.citation dt, .citation .label")]
    keys = re.findall(r"^@\w+\{([^,]+),", (ROOT / "references.bib").read_text(), re.M)
    assert len(set(labels)) >= len(keys), labels
    assert "Chen et al., 2023" in labels and "Leviathan et al., 2023" in labels
    assert not [label for label in labels if re.fullmatch(r"[A-Z][A-Za-z+]{1,5}\d{2}", label)], "alpha-style labels"
    chapter = (html_root / "book" / "06_speedup.html").read_text()
    assert "Chen et al., 2023" in chapter and "Leviathan et al., 2023" in chapter


@pytest.mark.slow
def test_the_index_has_entries(html_root):
    index = BeautifulSoup((html_root / "genindex.html").read_text(), "html.parser")
    entries = [a.get_text() for a in index.select("table.indextable a, .genindextable a")]
    assert len(entries) >= 30, entries
    for term in ("acceptance rate", "residual distribution", "roofline", "total variation distance"):
        assert any(term in e for e in entries), term


@pytest.mark.slow
def test_the_execution_report_covers_every_executed_page(html_root):
    report = BeautifulSoup((html_root / "book" / "execution_report.html").read_text(), "html.parser")
    rows = [[td.get_text(" ").strip() for td in tr.select("td")] for tr in report.select("table tbody tr")]
    pages = {row[0]: row for row in rows}
    for chapter in chapter_pages(html_root):
        assert chapter.stem in pages, chapter.stem
    for measured in ("01_memory_bound", "07_machines", "09_mistakes"):
        assert "passes: " in pages[measured][-1] and "stable" in pages[measured][-1]
    assert pages["02_acceptance"][-1] == "none"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row[1]) and row[4] for row in rows)


def _title(page: str) -> str:
    """A page's title: the first level-1 heading of its source."""
    for line in (ROOT / f"{page}.md").read_text().splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise AssertionError(f"{page}.md has no level-1 heading")


def test_no_sidebar_entry_repeats_the_caption_above_it():
    """The sidebar shows each part's caption above its pages' titles: a page titled like its part reads twice
    ("Labs", then "Labs")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    repeated = []
    for part in toc["parts"]:
        for chapter in part["chapters"]:
            title = _title(chapter["file"])
            if title.casefold() == part["caption"].casefold():
                repeated.append(f"{chapter['file']}: titled {title!r} under the caption {part['caption']!r}")
    assert not repeated, repeated
