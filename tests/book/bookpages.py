"""What the book's tests share: the built pages, and whether a browser is at hand."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from browser import book_pages, find_chromium

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install -y chromium): cannot open pages"
)


def site_pages(html_root: Path) -> list[Path]:
    """Every content page of the built site: the book's pages and the generated index."""
    return book_pages(html_root) + [html_root / "genindex.html"]


def chapter_pages(html_root: Path) -> list[Path]:
    return sorted((html_root / "book").glob("[0-9][0-9]_*.html"))


def toc_documents(toc: dict | None = None) -> dict[str, int]:
    """Every page of _toc.yml (read from the repository unless given) in reading order, the root first, with
    its depth: 0 for the root and the chapters, 1 for a chapter's sections, and so on. The tests read the table
    of contents themselves rather than through book/_ext/print_pdf.py, whose reading they check."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text()) if toc is None else toc
    docs = {toc["root"]: 0}

    def walk(entries, depth):
        for entry in entries or []:
            if "file" in entry:
                docs[entry["file"]] = depth
            walk(entry.get("sections"), depth + 1)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), 0)
    walk(toc.get("chapters"), 0)
    return docs


# the front matter of a MyST notebook page, for the small books and pages the tests build
MYST_FRONT_MATTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
