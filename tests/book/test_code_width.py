"""Every line of code the book shows fits the PDF's code column.

The PDF sets code small enough for 88 characters to fit its column (_static/speclab.css); a
longer line wraps there, which breaks the code's indentation, and tests/book/test_pdf.py checks
that every line is printed whole. The web page would scroll instead, but both show the same
source, so the limit is set once, on the sources.

Code is what sits inside a code fence of book/**/*.md: the executed cells (```{code-cell}),
code shown but not run (```{code-block} python) and plain fences (```python, ```ipython3,
```bash, or none): everything the page sets in a fixed-width block. A cell's options
(`:tags: [...]` lines or a `---` block right after its fence) are not shown and not counted.
A fence ends at the first line that is exactly a fence of the same number of backticks, so a
shorter fence shown inside a block does not end it; the body of any other directive (an
exercise, a proof, an admonition) is prose, wrapped by the page.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
# Longer lines wrap in the PDF's code column; the web shows the same code.
MAX_CODE_LINE = 88

FENCE = re.compile(r"^(`{3,})\s*(.*)$")  # the backticks, then the info: `{code-cell} ipython3`, `python`, ...
CODE_DIRECTIVES = {"code-cell", "code-block", "code", "sourcecode"}  # shown as typed; other directives hold prose


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line of code in a MyST page, numbered from 1."""
    found = []
    lines = text.splitlines()
    prose = []  # the fences of the directives open around this line, innermost last
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i].strip())
        i += 1
        if not opening:
            continue
        fence, info = opening.groups()
        if not info and prose and fence == prose[-1]:
            prose.pop()  # the end of an exercise, a proof, an admonition
            continue
        directive = re.match(r"\{([\w:-]+)\}", info)
        if directive and directive.group(1) not in CODE_DIRECTIVES:
            prose.append(fence)  # its body is prose, and may hold code blocks
            continue
        if directive:  # a cell's options are not shown
            if i < len(lines) and lines[i].strip() == "---":
                i += 1
                while i < len(lines) and lines[i].strip() != "---":
                    i += 1
                i += 1
            while i < len(lines) and lines[i].startswith(":"):
                i += 1
        while i < len(lines) and lines[i].strip() != fence:
            found.append((i + 1, lines[i]))
            i += 1
        i += 1  # the closing fence
    return found


def too_wide(text: str, where: str = "") -> list[str]:
    """`where:line: N chars` for every line of code in `text` longer than MAX_CODE_LINE."""
    return [f"{where}:{n}: {len(line)} chars" for n, line in code_lines(text) if len(line) > MAX_CODE_LINE]


def test_every_line_of_code_in_the_book_fits_the_pdf_column():
    pages = sorted(BOOK.glob("**/*.md"))
    assert pages
    problems = [p for page in pages for p in too_wide(page.read_text(), str(page.relative_to(ROOT)))]
    assert not problems, (f"{len(problems)} lines of code are longer than {MAX_CODE_LINE} characters "
                          "(cut in the PDF):\n" + "\n".join(problems))


def test_the_scanner_reports_long_code_and_only_code():
    code_89 = "y = '" + "z" * 83 + "'"
    assert len(code_89) == MAX_CODE_LINE + 1
    page = "\n".join([
        "# A page",                # 1
        "",                        # 2
        "x" * 200,                 # 3: prose, wrapped by the page
        "",                        # 4
        "```{code-cell} ipython3",  # 5
        "---",                     # 6
        "tags: [" + "a" * 100 + "]",  # 7: a cell option, not shown
        "---",                     # 8
        "print(1)",                # 9
        code_89,                   # 10: the one line too wide
        "```",                     # 11
        "",                        # 12
        "```{exercise}",           # 13
        "o" * 120,                 # 14: the body of a directive is prose
        "```",                     # 15
        "",                        # 16
        "````python",              # 17
        "```",                     # 18: a shorter fence does not end the block
        "w" * MAX_CODE_LINE,       # 19: exactly the limit
        "````",                    # 20
    ])
    assert too_wide(page, "page.md") == ["page.md:10: 89 chars"]
    assert [n for n, _ in code_lines(page)] == [9, 10, 18, 19]
