"""The whole book as one PDF: produced by the build's own command, offline, and it opens; an unchanged book is not
printed twice.

`make print-pdf` (what `make pdf` and `make book` run after the HTML build) prints the test
session's fresh build: the single-page HTML is built from its execution cache (nothing is
executed again) and printed by headless Chromium (book/_ext/print_pdf.py). The PDF is then
read with pypdfium2 (PDFium's own text layer): it has the pages of a book, every chapter's title,
the quizzes' answers printed open, the bibliography with the labels the text cites, and the version.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pypdfium2
import pytest

from bookpages import ROOT, needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]
JUPYTER_BOOK = Path(sys.executable).with_name("jupyter-book")
TITLES = ["Why decoding is memory-bound", "The acceptance criterion", "The residual distribution and exactness",
          "The acceptance rate is one minus total variation", "Tokens per step", "Speedup and the optimal draft length",
          "From formulas to machines", "Beyond a single chain", "Mistakes in the wild", "Bibliography", "Execution report"]


@pytest.fixture(scope="module")
def pdf(book_out) -> Path:
    result = subprocess.run(["make", "-s", "print-pdf", f"BOOK_OUT={book_out}", f"JB={JUPYTER_BOOK}",
                             f"PY={sys.executable}"], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return book_out / "_build" / "html" / "speclab.pdf"


def test_the_pdf_opens_and_holds_the_whole_book(pdf):
    doc = pypdfium2.PdfDocument(pdf)
    pages = len(doc)
    text = "\n".join(doc[i].get_textpage().get_text_range() for i in range(pages))
    doc.close()
    flat = " ".join(text.split())
    print(f"{pdf}: {pages} pages, {pdf.stat().st_size / 1e6:.1f} MB")
    assert pages >= 60
    missing = [t for t in TITLES if t not in flat]
    assert not missing, f"chapters missing from the PDF: {missing}"
    assert flat.count("The quiz as text, with answers") >= 9 and flat.count("Answers") >= 9, "quizzes not printed open"
    assert "Chen et al., 2023" in flat and "Leviathan et al., 2023" in flat
    assert "speclab 0.1.0" in flat or "version 0.1.0" in flat


def test_a_missing_single_page_book_is_refused(tmp_path):
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import print_pdf

    with pytest.raises(FileNotFoundError, match="no single-page book"):
        print_pdf.print_pdf(tmp_path, tmp_path / "x.pdf")


def test_an_unchanged_book_is_not_printed_again(pdf, book_out):
    """Issue 51: `make book` reprinted the whole PDF on every run. The digest of what it is printed from is kept
    beside it; a second `make print-pdf` on the same build says the PDF is up to date and leaves it as it is."""
    before = pdf.stat().st_mtime_ns
    result = subprocess.run(["make", "-s", "print-pdf", f"BOOK_OUT={book_out}", f"JB={JUPYTER_BOOK}",
                             f"PY={sys.executable}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "The PDF is up to date" in result.stdout, result.stdout[-2000:]
    assert pdf.stat().st_mtime_ns == before
    assert pdf.with_name("speclab.pdf.digest").read_text().strip() != ""
