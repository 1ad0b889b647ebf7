"""What the book's tests share: the built pages, and whether a browser is at hand."""
from __future__ import annotations

from pathlib import Path

import pytest

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
