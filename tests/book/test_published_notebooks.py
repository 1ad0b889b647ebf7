"""The notebooks the site publishes (`notebooks/`, which Colab and the download menu open) read clean.

A reader in Colab, or in a Jupyter without a MyST extension, sees Markdown as CommonMark plus `$` math.
Every published notebook of the session's fresh build is opened and must hold no MyST: no glue role,
no directive fence (```` ```{name} ```` or `:::{name}`), no role (`` {name}`...` ``), no `(label)=`
target, no `<script>` of the web page, and no link that leads nowhere (a link into the site must name a page the build wrote and an
anchor on it; an image must be an attachment of its cell). A chapter's notebook starts with the
set-up cell and keeps its outputs: as many code cells with outputs as the page shows.

The converter is book/_ext/publish.py. The fast tests build a one-chapter book that uses each construct
once, through the same extension, and check what it became; and they show that the check finds each
construct in the chapter's source (so it can fail).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt

from bookpages import MYST_FRONT_MATTER, ROOT, chapter_pages

BASEURL = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["baseurl"].rstrip("/")

GLUE = re.compile(r"\{glue")
FENCE = re.compile(r"^[ \t>]*(?:`{3,}|~{3,}|:{3,})\s*\{[^}\s]*\}?", re.MULTILINE)
ROLE = re.compile(r"\{[a-z:-]+\}`")
TARGET = re.compile(r"^[ \t>]*\([\w:.-]+\)=\s*$", re.MULTILINE)
SCRIPT = re.compile(r"<script\b", re.IGNORECASE)  # the web page's own scripts (thebe's configuration...)
MARKDOWN = MarkdownIt("commonmark").enable("table")


def markdown_of(nb) -> list[tuple[int, str]]:
    """(cell index, text) of what a front end renders as Markdown: the Markdown cells and Markdown outputs."""
    out = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    for i, c in enumerate(nb.cells):
        for output in c.get("outputs", []):
            if "text/markdown" in output.get("data", {}):
                out.append((i, output["data"]["text/markdown"]))
    return out


def links_of(text: str) -> list[str]:
    """Every link's and image's address in a Markdown text (markdown-it, so code spans are not read)."""
    found = []
    for token in MARKDOWN.parse(text):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(child.attrGet("href"))
            elif child.type == "image":
                found.append(child.attrGet("src"))
    return found


def leftovers(nb, html_root: Path | None = None, baseurl: str = BASEURL) -> dict[str, list[str]]:
    """What a reader without MyST would see raw, by kind: {"glue": [...], "directive": [...], ...}.
    Links into the site (`baseurl`) are checked against the build in `html_root` when it is given."""
    found: dict[str, list[str]] = {"glue": [], "directive": [], "role": [], "target": [], "script": [], "link": []}
    for i, text in markdown_of(nb):
        found["glue"] += [f"cell {i}: {m.group(0)}" for m in GLUE.finditer(text)]
        found["directive"] += [f"cell {i}: {m.group(0).strip()}" for m in FENCE.finditer(text)]
        found["role"] += [f"cell {i}: {m.group(0)}" for m in ROLE.finditer(text)]
        found["target"] += [f"cell {i}: {m.group(0).strip()}" for m in TARGET.finditer(text)]
        found["script"] += [f"cell {i}: {text[m.start():m.start() + 60]}" for m in SCRIPT.finditer(text)]
        attachments = nb.cells[i].get("attachments", {})
        for url in links_of(text):
            problem = link_problem(url, attachments, html_root, baseurl)
            if problem:
                found["link"].append(f"cell {i}: {url}: {problem}")
    return found


def link_problem(url: str, attachments: dict, html_root: Path | None, baseurl: str) -> str | None:
    if url.startswith("attachment:"):
        return None if url.removeprefix("attachment:") in attachments else "no such attachment in the cell"
    if url.startswith(baseurl + "/"):
        if html_root is None:
            return None
        page, _, anchor = url.removeprefix(baseurl + "/").partition("#")
        target = html_root / page
        if not target.is_file():
            return "the build wrote no such page"
        if anchor and f'id="{anchor}"' not in target.read_text(errors="replace"):
            return f"no anchor {anchor!r} on {page}"
        return None
    if re.match(r"^(https?|mailto):", url):
        return None  # another site
    return "a relative link, which leads nowhere from Colab"


def published(html_root: Path) -> list[Path]:
    return sorted((html_root / "notebooks").rglob("*.ipynb"))


@pytest.mark.slow
def test_every_published_notebook_reads_clean(html_root):
    notebooks = published(html_root)
    assert len(notebooks) >= 12, notebooks
    report = {}
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        problems = [p for kind in leftovers(nb, html_root).values() for p in kind]
        # the kernel its page names, which Colab and Binder have (the build runs the pages in speclab-book)
        if nb.metadata.get("kernelspec", {}).get("name", "python3") != "python3":
            problems.append(f"kernelspec {nb.metadata.kernelspec.name!r}: Colab and Binder have python3")
        if problems:
            report[str(path.relative_to(html_root))] = problems
    assert not report, "\n".join(f"{nb} ({len(ps)}):\n  " + "\n  ".join(ps[:8]) for nb, ps in report.items())


@pytest.mark.slow
def test_every_chapter_notebook_starts_with_the_set_up_and_keeps_its_outputs(html_root):
    for path in sorted((html_root / "notebooks" / "book").rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        first = nb.cells[0]
        assert first.cell_type == "code" and "speclab-setup" in first.metadata.get("tags", []), path.name
        assert "importlib.util.find_spec(\"speclab\")" in first.source, path.name
        page = html_root / path.relative_to(html_root / "notebooks").with_suffix(".html")
        shown = len(BeautifulSoup(page.read_text(), "html.parser").select("div.cell_output"))
        with_outputs = sum(1 for c in nb.cells[1:] if c.cell_type == "code" and c.outputs)
        assert with_outputs == shown, f"{path.name}: {with_outputs} code cells with outputs, the page shows {shown}"
    assert chapter_pages(html_root)


# ------------------------------------------------------------------ a one-chapter book, one of each construct
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
TINY_BASEURL = "https://example.org/course"

CHAPTER = MYST_FRONT_MATTER + '''\

# Constructs

```{code-cell} ipython3
:tags: [hide-cell]
import base64
from IPython.display import Image, Markdown
from myst_nb import glue

glue("ratio", 0.123456, display=False)
glue("count", 1234567, display=False)
glue("words", Markdown("**bold** and *slanted*"), display=False)
glue("dot", Image(data=base64.b64decode("PNG")), display=False)
print("visible output")
```

```{code-cell} ipython3
:tags: [remove-cell]
print("removed cell")
```

```{code-cell} ipython3
:tags: [remove-input, remove-output]
hidden_but_needed = 1
```

(sec-start)=
## Start

```{index} keep-or-replace rule
```

Values: {glue:text}`ratio:.3f`, {glue:text}`count:,`, {glue:md}`words`, {glue}`ratio`.
Links: {doc}`other`, {ref}`sec-start`, {numref}`fig-dot`, {prf:ref}`thm-main`, {eq}`eq-main`,
{cite:p}`chen2023`, {cite:t}`chen2023`, {term}`draft`, {math}`x^2` and $z$; it costs \\$5.

$$
a = b
$$ (eq-main)

```{math}
:label: eq-two
c = d
```

```{prf:theorem} Main result
:label: thm-main
A statement about $p$.
```

```{prf:proof}
Obvious.
```

```{prf:lemma} Helper
:label: lem-help
A lemma.
```

```{prf:definition} Word
:label: def-word
A definition.
```

```{prf:algorithm} Steps
:label: alg-steps
An algorithm.
```

```{note}
A note.
```

```{warning}
A warning.
```

```{admonition} Careful
:class: dropdown
A dropdown.
```

:::{tip}
A colon-fenced tip.
:::

```{figure} dot.png
:name: fig-dot

A dot in a file.
```

```{glue:figure} dot
:name: fig-glued

A glued dot.
```

```{glossary}
draft
  The small model.
```

## Exercises

```{exercise}
:label: ex-one
Do it.
```

```{solution-start} ex-one
```

First the text, then code:

```{code-cell} ipython3
print("solution output")
```

```{solution-end}
```

```{exercise} Named
:label: ex-two
Again.
```

```{solution} ex-two
Answer.
```

## References

```{bibliography}
```
'''.replace("PNG", PNG)

CONF = f'''\
import sys
sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
extensions = ["myst_nb", "sphinx_proof", "sphinx_exercise", "sphinxcontrib.bibtex", "speclab_book"]
html_theme = "sphinx_book_theme"
html_theme_options = {{"repository_url": "https://github.com/example/course", "repository_branch": "main",
                       "launch_buttons": {{"colab_url": "https://colab.research.google.com"}}}}
html_baseurl = {TINY_BASEURL!r}
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
nb_execution_mode = "cache"
bibtex_bibfiles = ["refs.bib"]
bibtex_reference_style = "author_year"
bibtex_default_style = "speclab_author_year"
numfig = True
numfig_secnum_depth = 1
math_numfig = True
suppress_warnings = ["mystnb.unknown_mime_type"]
exclude_patterns = ["_build"]
'''


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory) -> Path:
    """A one-chapter book built with the book's extension; the folder holding its `_build/`."""
    src = tmp_path_factory.mktemp("tiny_book")
    (src / "conf.py").write_text(CONF)
    (src / "index.md").write_text("# Course\n\n```{toctree}\n:numbered:\nchapter\nother\n```\n")
    (src / "other.md").write_text("# Other page\n\nNothing here.\n")
    (src / "chapter.md").write_text(CHAPTER)
    (src / "dot.png").write_bytes(__import__("base64").b64decode(PNG))
    (src / "refs.bib").write_text("@article{chen2023, author = {Chen, Charlie and Borgeaud, Sebastian and Irving, "
                                  "Geoffrey}, title = {Accelerating decoding}, journal = {arXiv}, year = {2023}}\n")
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-n", "--keep-going", "-q", str(src),
               str(src / "_build" / "html")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return src


def tiny_notebook(tiny_book: Path):
    return nbformat.read(tiny_book / "_build" / "html" / "notebooks" / "chapter.ipynb", as_version=4)


def test_the_check_finds_each_construct_in_the_myst_source():
    found = leftovers(jupytext.reads(CHAPTER, fmt="md:myst"))
    assert len(found["glue"]) == 5  # four roles and the glue:figure directive
    fences = {re.sub(r"^[`:~\s]*", "", f.split(": ", 1)[1]) for f in found["directive"]}
    assert {"{index}", "{math}", "{prf:theorem}", "{prf:proof}", "{prf:lemma}", "{prf:definition}", "{prf:algorithm}",
            "{note}", "{warning}", "{admonition}", "{tip}", "{figure}", "{glue:figure}", "{glossary}", "{exercise}",
            "{solution-start}", "{solution-end}", "{solution}", "{bibliography}"} <= fences
    roles = {f.split(": ", 1)[1] for f in found["role"]}
    assert {"{doc}`", "{ref}`", "{numref}`", "{prf:ref}`", "{eq}`", "{cite:p}`", "{cite:t}`", "{term}`", "{math}`",
            "{glue:text}`", "{glue:md}`", "{glue}`"} <= roles
    assert [t.split(": ", 1)[1] for t in found["target"]] == ["(sec-start)="]


def test_the_check_refuses_links_that_lead_nowhere(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.html").write_text('<h1 id="top">A</h1>')
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        f"[ok]({BASEURL}/book/a.html#top) [gone]({BASEURL}/book/b.html) [anchor]({BASEURL}/book/a.html#nope) "
        "[relative](03_exactness.md) ![img](attachment:x.png) [web](https://arxiv.org/abs/1) `[code](nowhere.md)`")])
    problems = leftovers(nb, tmp_path)["link"]
    assert [p.split(": ")[1] for p in problems] == [f"{BASEURL}/book/b.html", f"{BASEURL}/book/a.html#nope",
                                                     "03_exactness.md", "attachment:x.png"], problems


def test_the_converter_writes_each_construct_as_plain_markdown(tiny_book):
    nb = tiny_notebook(tiny_book)
    found = leftovers(nb, tiny_book / "_build" / "html", TINY_BASEURL)
    assert not any(found.values()), found
    text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for expected in (
        "Values: 0.123, 1,234,567, **bold** and *slanted*, 0.123456.",  # glue:text with its format, glue:md, glue
        "**Theorem 1.1 (Main result).** A statement about $p$.", "*Proof.* Obvious.",
        "**Lemma 1.1 (Helper).** A lemma.", "**Definition 1.1 (Word).** A definition.",
        "**Algorithm 1.1 (Steps).** An algorithm.",
        "> **Note**\n>\n> A note.", "> **Warning**\n>\n> A warning.", "> **Careful**\n>\n> A dropdown.",
        "> **Tip**\n>\n> A colon-fenced tip.",
        "**Exercise 1.1.** Do it.", "**Solution to Exercise 1.1.** First the text, then code:",
        "**Exercise 1.2 (Named).** Again.", "**Solution to Exercise 1.2 (Named).** Answer.",
        "**Figure 1.1.** A dot in a file.", "**Figure 1.2.** A glued dot.",
        "$$ a = b \\tag{1.1} $$", "$$ c = d \\tag{1.2} $$", "$x^2$ and $z$; it costs \\$5.",
        f"[Other page]({TINY_BASEURL}/other.html)", f"[Start]({TINY_BASEURL}/chapter.html#sec-start)",
        f"[Fig. 1.1]({TINY_BASEURL}/chapter.html#fig-dot)", f"[Theorem 1.1]({TINY_BASEURL}/chapter.html#thm-main)",
        f"[(1.1)]({TINY_BASEURL}/chapter.html#equation-eq-main)", "Chen *et al.*, 2023", "- **Chen et al., 2023.**",
    ):
        assert expected in text, f"{expected!r} not in\n{text}"
    assert "keep-or-replace rule" not in text  # the {index} entry is not prose
    images = [c for c in nb.cells if c.get("attachments")]
    assert len(images) >= 1 and all("image/png" in a for c in images for a in c.attachments.values())

    code = [c for c in nb.cells[1:] if c.cell_type == "code"]  # after the set-up cell
    first_lines = [c.source.splitlines()[0] for c in code]
    assert first_lines == ["import base64", "hidden_but_needed = 1", 'print("solution output")']
    glue_cell, hidden, solution = code
    assert glue_cell.metadata["tags"] == ["hide-cell"]
    assert glue_cell.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    assert [o.get("text") for o in glue_cell.outputs] == ["visible output\n"], "glue records are not outputs"
    assert hidden.metadata["jupyter"] == {"source_hidden": True} and hidden.outputs == []
    assert solution.outputs[0]["text"] == "solution output\n"
    # the solution's code sits between its text and the next exercise
    start = next(i for i, c in enumerate(nb.cells) if "**Solution to Exercise 1.1.**" in c.source)
    assert nb.cells[start].source.endswith("First the text, then code:")
    assert nb.cells[start + 1].source == 'print("solution output")'
    assert nb.cells[start + 2].source.startswith("**Exercise 1.2 (Named).**")


def test_the_tiny_book_publishes_its_notebook_with_the_set_up_first(tiny_book):
    nb = tiny_notebook(tiny_book)
    assert "speclab-setup" in nb.cells[0].metadata["tags"]
    assert "https://github.com/example/course.git" in nb.cells[0].source
    assert not (tiny_book / "_build" / "html" / "notebooks" / "other.ipynb").exists(), "a page that is no notebook"
    page = BeautifulSoup((tiny_book / "_build" / "html" / "chapter.html").read_text(), "html.parser")
    download = page.select_one("a.btn-download-notebook-button")
    assert download is not None and download["href"].endswith("notebooks/chapter.ipynb"), download


@pytest.mark.parametrize("text, kind", [
    ("```{note}", "directive"), ("> :::{tip}", "directive"), ("~~~{math}", "directive"),
    ("see {prf:ref}`thm`", "role"), ("{cite:p}`x`", "role"), ("{glue:text}`k:.2f`", "glue"), ("(sec-x)=", "target"),
    ('<script type="text/x-thebe-config">', "script"), ("[a page](chapter.md)", "link"),
])
def test_each_pattern_catches_its_construct(text, kind):
    found = leftovers(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)]))
    assert found[kind], found


@pytest.mark.parametrize("text", ["```python", "a dict {a} in prose", "a set {1, 2}`", "`(a)=`  is code"])
def test_plain_markdown_is_not_caught(text):
    assert not any(leftovers(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])).values())
