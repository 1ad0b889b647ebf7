"""A chapter as a plain Jupyter notebook: what `notebooks/<page>.ipynb` of the built site holds.

Who reads it: someone who pressed the Colab button, or downloaded the notebook into a Jupyter without a
MyST extension. They should read what the web page says: the numbers the page computed, "Theorem 2.1"
where the page numbers a theorem, a link where it links, and every cell's outputs. The MyST source does
not say that: glue roles, directives and cross-references mean something only to Sphinx.

So the notebook is written from what Sphinx made of the page rather than from its source:

* **The prose comes from the page's resolved doctree** (`env.get_and_resolve_doctree`). By then each
  glue role holds its formatted value, each `{doc}`, `{ref}`, `{numref}`, `{eq}` and `{prf:ref}` is a
  reference with its final text ("Theorem 2.1", "(2.3)"), each citation carries its author-year label,
  `{index}` entries are invisible nodes, and sphinx-exercise has moved every solution's content into
  its solution. `MarkdownWriter` renders these docutils nodes as Markdown with `$...$` math, one
  method per kind of node, and logs a warning (an error under the book's `-W`) for a kind it does not
  know, instead of letting raw text through.
* **Numbers** that the HTML writer adds while writing (theorems, exercises, figures, equations) are
  read where it reads them, `env.toc_fignumbers`.
* **The code cells and their outputs** come from the notebook myst-nb executed, matched to the doctree
  by the `cell_index` myst-nb puts on each code cell's container (see `executed_notebook`).

Why not rewrite the MyST source instead (markdown-it finds fences and roles reliably)? Finding the
constructs is the easy half; giving each its value would mean redoing Sphinx's work: the label tables
of four domains, the numbering, the bibliography's labels, glue's format specs. The doctree has all of
it, and keeps being right when a page uses a construct such a rewriter would not know.

What each construct becomes:

* theorems, lemmas, definitions, algorithms..., exercises and solutions: a paragraph that starts with
  a bold head, "**Theorem 2.1 (title).**", "**Exercise 2.1.**", "**Solution to Exercise 2.1.**"; a
  proof starts with "*Proof.*";
* admonitions (note, tip, warning, `{admonition}`, dropdowns): a blockquote with a bold title;
* display math: `$$ ... $$` on one line (so that it survives a blockquote's `>`), with `\\tag{2.1}`
  where the page numbers the equation;
* references and citations: links to the page on the published site, `<html_baseurl>/<page>.html#id`
  (plain text when the book has no `html.baseurl`); external links unchanged;
* a figure or image in the prose (a `{glue:figure}`, a `{figure}`): a Markdown image whose file is an
  attachment of its cell (`attachment:<name>`, nbformat's own way); the caption follows in a
  paragraph, "**Figure 2.1.** ...". The figure a code cell draws stays its output, and its caption
  (the cell's `mystnb.figure` option) becomes a short Markdown cell below it;
* cell tags: `remove-cell` cells are left out, as on the page; the others keep their tags, and
  `hide-input`, `hide-output`, `hide-cell` and `remove-input` also set Jupyter's own
  `jupyter.source_hidden` / `jupyter.outputs_hidden`, so JupyterLab collapses what the page hides
  (the code stays: the notebook has to run); `remove-output` drops the outputs;
* glue records (outputs of `glue(..., display=False)`, which no front end shows) are dropped, and so
  are the web page's own scripts (sphinx-thebe's configuration); other raw HTML is kept.
"""
from __future__ import annotations

import base64
import bisect
import copy
import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin

import nbformat
from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.locale import admonitionlabels
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

# myst-nb's tags -> nbformat's `jupyter` cell metadata, which JupyterLab and Notebook 7 honour
HIDDEN_BY_TAG = {
    "hide-input": {"source_hidden": True},
    "remove-input": {"source_hidden": True},
    "hide-output": {"outputs_hidden": True},
    "hide-cell": {"source_hidden": True, "outputs_hidden": True},
}
REMOVE_CELL = {"remove-cell", "remove_cell"}
REMOVE_OUTPUT = {"remove-output", "remove_output"}

# Characters Markdown (CommonMark, plus `$` for Jupyter's math) would read as syntax inside running text.
SPECIAL = re.compile(r"([\\`*_\[\]<$~])")
# Raw HTML that only configures the web page (sphinx-thebe and myst-nb put such scripts into the doctree).
SCRIPT = re.compile(r"^\s*<(script|style|link)\b", re.IGNORECASE)
# A line starting like this would turn into a heading, a list, a quote or a rule.
BLOCK_START = re.compile(r"^(\s*)(#{1,6}(?=\s|$)|[-+*](?=\s|$)|\d{1,9}(?=[.)](\s|$))|>|=+\s*$)")


# ------------------------------------------------------------------------ the executed notebook
def executed_notebook(app: Sphinx, docname: str) -> nbformat.NotebookNode:
    """The notebook myst-nb rendered the page from, with the outputs the build computed.

    myst-nb writes the notebook it read to its output folder (`_build/jupyter_execute/<page>.ipynb`).
    Executed directly (`force`, `auto`) that copy holds the outputs; in `cache` mode (the book's) it does
    not, and the outputs are those of the jupyter-cache record matching its code, merged into it the way
    myst-nb itself merges them. The cell indices are the ones on the doctree's code-cell containers.
    """
    config = app.env.mystnb_config
    path = Path(config.output_folder, *f"{docname}.ipynb".split("/"))
    notebook = nbformat.read(path, as_version=4)
    source = PurePosixPath(Path(app.env.doc2path(docname)).as_posix())
    excluded = any(source.match(pattern) for pattern in config.execution_excludepatterns)  # as myst-nb decides
    if config.execution_mode == "cache" and not excluded:
        from jupyter_cache import get_cache

        try:
            _, notebook = get_cache(config.execution_cache_path).merge_match_into_notebook(notebook)
        except KeyError:
            LOGGER.warning(f"speclab: no executed copy of {docname} in the execution cache; "
                           "its published notebook has no outputs", location=docname)
    return notebook


def published_notebook(app: Sphinx, docname: str) -> nbformat.NotebookNode:
    """The page `docname` as a plain notebook (without the set-up cell, which the caller adds)."""
    executed = executed_notebook(app, docname)
    doctree = app.env.get_and_resolve_doctree(docname, app.builder)
    cells = MarkdownWriter(app, docname, executed).cells(doctree)
    metadata = {k: executed.metadata[k] for k in ("kernelspec", "language_info") if k in executed.metadata}
    # the kernel the page itself names (python3, which Colab and Binder have), not the one the build ran it in
    # (_config.yml's nb_kernel_rgx_aliases renames it in the executed copy: speclab_book.py, kernel_as_written)
    if "kernelspec" in app.env.metadata.get(docname, {}):
        metadata["kernelspec"] = dict(app.env.metadata[docname]["kernelspec"])
    return nbformat.v4.new_notebook(cells=cells, metadata=metadata)


# ------------------------------------------------------------------------------- the writer
@dataclass
class CodeCell:
    """Where the doctree has a code cell: the notebook's cell of that index goes there."""
    container: nodes.container


@dataclass
class SourceCell:
    """The prose that follows comes from the notebook's cell `index` (code cells before it go first)."""
    index: int


def _join(blocks: list[list]) -> list:
    """Blocks of lines (and code cells) one after the other, a blank line between two blocks."""
    out: list = []
    for block in blocks:
        if not block:
            continue
        if out:
            out.append("")
        out.extend(block)
    return out


def _prefix(lines: list, first: str, rest: str) -> list:
    """Lines with `first` before the first and `rest` before every other one (list items, quotes)."""
    out, seen_first = [], False
    for line in lines:
        if not isinstance(line, str):
            out.append(line)
            continue
        out.append(((rest if seen_first else first) + line).rstrip() if line else rest.rstrip())
        seen_first = True
    return out


def _titled(node: nodes.Node) -> bool:
    """A section with a heading (sphinx-proof and sphinx-exercise wrap a statement's body in untitled ones)."""
    return isinstance(node, nodes.section) and bool(node.children) and isinstance(node[0], nodes.title)


def escape(text: str) -> str:
    """Running text as Markdown that reads as that text (no emphasis, link, math or HTML by accident)."""
    return SPECIAL.sub(r"\\\1", text.replace("\n", " "))


def escape_line_start(line: str) -> str:
    """A paragraph's line that must not become a heading, a list item, a quote or a rule."""
    m = BLOCK_START.match(line)
    if not m:
        return line
    if m.group(3) is not None:  # "2023. Foo" or "1) foo": escape the dot or the parenthesis
        end = m.end(2)
        return line[:end] + "\\" + line[end:]
    return line[:m.end(1)] + "\\" + line[m.end(1):]


def one_line_tex(tex: str) -> str:
    """LaTeX on one line: TeX comments (to the end of a line) dropped, lines joined by spaces."""
    lines = [re.sub(r"(?<!\\)%.*$", "", line).strip() for line in tex.strip().splitlines()]
    return " ".join(line for line in lines if line)


class MarkdownWriter:
    """A page's resolved doctree as notebook cells: Markdown for the prose, the executed notebook's
    code cells where the doctree has code cells (see the module's docstring for what becomes what)."""

    def __init__(self, app: Sphinx, docname: str, executed: nbformat.NotebookNode):
        self.app, self.env, self.docname, self.executed = app, app.env, docname, executed
        self.baseurl = (app.config.html_baseurl or "").rstrip("/")
        self.page_url = f"{self.baseurl}/{docname}.html" if self.baseurl else ""
        self.numbers = self.env.toc_fignumbers.get(docname, {})
        self.attachments: dict[str, dict] = {}  # attachment name -> {mime type: base64}

    # ---------------------------------------------------------------- cells
    def cells(self, doctree: nodes.document) -> list[nbformat.NotebookNode]:
        items = self.body(doctree.children)
        on_page = {int(c["cell_index"]) for c in doctree.findall(nodes.container) if c.get("nb_element") == "cell_code"}
        cells: list[nbformat.NotebookNode] = []
        written = 0  # code cells of the executed notebook before this index are written (or dropped)
        text: list[str] = []

        def flush_markdown():
            while text and not text[-1]:
                text.pop()
            while text and not text[0]:
                text.pop(0)
            if text:
                cells.append(self.markdown_cell("\n".join(text)))
            text.clear()

        def not_on_page(start: int, stop: int) -> list[int]:
            """The code cells the page shows nothing of (`remove-input` and `remove-output`): kept, hidden."""
            return [i for i in range(start, stop) if self.executed.cells[i].cell_type == "code" and i not in on_page
                    and not REMOVE_CELL & set(self._tags(self.executed.cells[i]))]

        def code_cells_before(stop: int):
            nonlocal written
            for index in not_on_page(written, stop):
                cells.append(self.code_cell(index))
            written = max(written, stop)

        for item in items:
            if isinstance(item, SourceCell):
                if not_on_page(written, item.index):
                    flush_markdown()
                    code_cells_before(item.index)
            elif isinstance(item, CodeCell):
                flush_markdown()
                index = int(item.container["cell_index"])
                code_cells_before(index)
                cells.append(self.code_cell(index))
                written = max(written, index + 1)
                caption = self.code_cell_caption(item.container)
                if caption:
                    cells.append(self.markdown_cell(caption))
            else:
                text.append(item)
        flush_markdown()
        code_cells_before(len(self.executed.cells))
        return cells

    def markdown_cell(self, source: str) -> nbformat.NotebookNode:
        cell = nbformat.v4.new_markdown_cell(source)
        used = {name: self.attachments[name] for name in self.attachments if f"(attachment:{name})" in source}
        if used:
            cell["attachments"] = used
        return cell

    @staticmethod
    def _tags(cell) -> list[str]:
        return list(cell.get("metadata", {}).get("tags", []))

    def code_cell(self, index: int) -> nbformat.NotebookNode:
        from myst_nb.ext.glue import extract_glue_data_cell

        cell = copy.deepcopy(self.executed.cells[index])
        extract_glue_data_cell(cell)  # drops the glue records no front end shows; keeps displayed glue
        tags = set(self._tags(cell))
        if tags & REMOVE_OUTPUT:
            cell.outputs = []
        hidden: dict = {}
        for tag in sorted(tags):
            hidden.update(HIDDEN_BY_TAG.get(tag.replace("_", "-"), {}))
        if hidden:
            cell.metadata.setdefault("jupyter", {}).update(hidden)
        return cell

    def code_cell_caption(self, container: nodes.container) -> str:
        """The caption a code cell's figure has on the page (its `mystnb.figure` option), numbered."""
        for figure in container.findall(nodes.figure):
            for caption in figure.findall(nodes.caption):
                return self.figure_head(figure) + " " + self.inline_children(caption)
        return ""

    # ---------------------------------------------------------------- numbers and links
    def number(self, kind: str, node: nodes.Element) -> str:
        for node_id in node.get("ids", []):
            found = self.numbers.get(kind, {}).get(node_id)
            if found:
                return ".".join(map(str, found))
        return ""

    def figure_head(self, figure: nodes.Element) -> str:
        number = self.number("figure", figure)
        return f"**Figure {number}.**" if number else "**Figure.**"

    def url(self, node: nodes.Element) -> str:
        """Where a reference leads on the published site ('' where the book names no site)."""
        uri = node.get("refuri")
        if uri is not None:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", uri):
                return uri  # an external link, or mailto:
            return urljoin(self.page_url, uri) if self.page_url else ""
        if node.get("refid"):
            return f"{self.page_url}#{node['refid']}" if self.page_url else ""
        return ""

    def unresolved(self, node: nodes.Node, why: str) -> None:
        LOGGER.warning(f"speclab: the published notebook of {self.docname}: {why}: {node.astext()[:80]!r}",
                       location=node)

    # ---------------------------------------------------------------- blocks
    def blocks(self, children) -> list:
        return _join([self.block(child) for child in children])

    def body(self, children) -> list:
        """The blocks of the page or of a section, each after a marker of the notebook cell it comes from."""
        out = []
        for child in children:
            lines = self.block(child)
            index = self.source_cell(child)
            out.append(([SourceCell(index)] if lines and index is not None else []) + lines)
        return _join(out)

    def source_cell(self, node: nodes.Node) -> int | None:
        """The index of the notebook cell a node was read from: myst-nb numbers the doctree's lines from
        the notebook's `source_map` (the line each cell starts on) or, without one, from 10000 x (index + 1)."""
        line = getattr(node, "line", None)
        if not line:
            return None
        starts = self.executed.metadata.get("source_map")
        return bisect.bisect_left(starts, line) - 1 if starts else line // 10000 - 1

    def block(self, node: nodes.Node) -> list:
        """One block-level node as lines of Markdown, with CodeCell markers where the page has code cells."""
        if isinstance(node, nodes.container) and node.get("nb_element") == "cell_code":
            return [CodeCell(node)]
        if isinstance(node, (nodes.Invisible, addnodes.toctree, nodes.system_message)):
            return []  # targets, comments, {index} entries, hidden toctrees
        if isinstance(node, nodes.section):
            return self.section(node)
        if isinstance(node, (nodes.paragraph, addnodes.compact_paragraph)):
            line = self.inline_children(node).strip()
            return [escape_line_start(line)] if line else []
        if isinstance(node, (nodes.bullet_list, nodes.enumerated_list)):
            return self.list_block(node)
        if isinstance(node, nodes.definition_list):
            return _join([self.definition(item) for item in node.children])
        if isinstance(node, nodes.literal_block):
            return self.literal_block(node)
        if isinstance(node, nodes.math_block):
            return self.math_block(node)
        if isinstance(node, nodes.table):
            return self.table(node)
        if isinstance(node, nodes.figure):
            return self.figure(node)
        if isinstance(node, nodes.image):
            return [self.image(node)]
        if isinstance(node, nodes.raw):
            if node.get("format") != "html" or SCRIPT.match(node.astext()):
                return []  # the page's own scripts (sphinx-thebe's configuration...) mean nothing in a notebook
            return node.astext().splitlines()
        if isinstance(node, nodes.transition):
            return ["---"]
        if isinstance(node, nodes.rubric):
            return [f"**{self.inline_children(node)}**"]
        if isinstance(node, nodes.citation):
            return self.citation(node)
        if "realtype" in node and node.tagname != "proof_node":
            return self.proof_statement(node)  # sphinx-proof: theorem, lemma, definition, algorithm...
        if node.tagname == "proof_node":
            return self.proof(node)
        if node.tagname in ("exercise_enumerable_node", "exercise_unenumerable_node", "solution_node"):
            return self.exercise(node)
        if isinstance(node, (nodes.Admonition, nodes.topic, nodes.sidebar)):
            return self.admonition(node)
        if isinstance(node, nodes.block_quote):
            return _prefix(self.blocks(node.children), "> ", "> ")
        if isinstance(node, nodes.line_block):
            return ["<br>".join(self.inline_children(line) for line in node.findall(nodes.line))]
        if isinstance(node, nodes.footnote):
            label = node.next_node(nodes.label)
            body = self.blocks([c for c in node.children if not isinstance(c, nodes.label)])
            return _prefix(body, f"\\[{label.astext() if label else '*'}\\] ", "")
        if isinstance(node, (nodes.container, nodes.compound, nodes.document, addnodes.glossary)):
            return self.blocks(node.children)  # glued outputs in prose, bibliography lists, toctree wrappers
        self.unresolved(node, f"no Markdown for a {node.tagname} node (book/_ext/publish.py)")
        return [escape(node.astext())]

    def section(self, node: nodes.section) -> list:
        if not _titled(node):  # sphinx-proof's and sphinx-exercise's content sections
            return self.blocks(node.children)
        depth, parent = 1, node.parent
        while parent is not None:
            depth += _titled(parent)
            parent = parent.parent
        heading = "#" * min(depth, 6) + " " + self.inline_children(node[0])
        return _join([[heading], self.body(node.children[1:])])

    def list_block(self, node: nodes.Element) -> list:
        items = [self.blocks(item.children) for item in node.children]
        loose = any(sum(1 for line in item if line == "") for item in items)
        out: list = []
        start = int(node.get("start", 1))
        for n, lines in enumerate(items):
            marker = f"{start + n}. " if isinstance(node, nodes.enumerated_list) else "- "
            if any(isinstance(line, CodeCell) for line in lines):
                self.unresolved(node, "a code cell inside a list")
                lines = [line for line in lines if not isinstance(line, CodeCell)]
            if loose and out:
                out.append("")
            out.extend(_prefix(lines, marker, " " * len(marker)))
        return out

    def definition(self, item: nodes.definition_list_item) -> list:
        term = " ".join(self.inline_children(t) for t in item.findall(nodes.term))
        body = self.blocks(d for c in item.findall(nodes.definition) for d in c.children)
        return _prefix([f"**{term}**", ""] + body, "", "")

    @staticmethod
    def literal_block(node: nodes.literal_block) -> list:
        text = node.astext()
        fence = "~~~~" if "```" in text else "```"
        language = node.get("language", "")
        language = "" if language in ("default", "none", "text") else language
        return [fence + language, *text.splitlines(), fence]

    def math_block(self, node: nodes.math_block) -> list:
        tex = one_line_tex(node.astext())
        if node.get("nowrap"):
            return [tex]  # a whole environment (align...) that MathJax reads as it stands
        number = self.number("displaymath", node)
        return [f"$$ {tex}" + (f" \\tag{{{number}}}" if number else "") + " $$"]

    def table(self, node: nodes.table) -> list:
        rows = [[self.cell_text(entry) for entry in row.findall(nodes.entry)] for row in node.findall(nodes.row)]
        if not rows:
            return []
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        title = node.next_node(nodes.title)
        return ([f"**{self.inline_children(title)}**", ""] if title is not None else []) + lines

    def cell_text(self, entry: nodes.entry) -> str:
        parts = [line for line in self.blocks(entry.children) if isinstance(line, str) and line]
        return "<br>".join(parts).replace("|", "\\|")

    def figure(self, node: nodes.figure) -> list:
        images = [self.image(i) for i in node.findall(nodes.image)]
        caption = node.next_node(nodes.caption)
        lines = [" ".join(images)] if images else []
        if caption is not None:
            lines += ["", self.figure_head(node) + " " + self.inline_children(caption)]
        return lines

    def image(self, node: nodes.image) -> str:
        """An image as an attachment of its cell (or a link, for an image on the web)."""
        uri = node.get("candidates", {}).get("*") or node.get("uri", "")
        alt = escape(node.get("alt", ""))
        if re.match(r"^(https?:|data:)", uri):
            return f"![{alt}]({uri})"
        path = Path(self.app.srcdir, uri)
        if not path.is_file():
            self.unresolved(node, f"an image that is not in the sources ({uri})")
            return alt
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self.attachments[path.name] = {mime: base64.b64encode(path.read_bytes()).decode("ascii")}
        return f"![{alt}](attachment:{path.name})"

    def citation(self, node: nodes.citation) -> list:
        """One entry of a bibliography. sphinxcontrib-bibtex appends the label and the text to a citation
        node it keeps between builds of a page, so a page resolved twice (for HTML, then here) holds them
        twice: the first of each is the entry."""
        label = node.next_node(nodes.label)
        text = next((c for c in node.children if isinstance(c, nodes.paragraph)), None)
        body = self.inline_children(text) if text is not None else ""
        return [f"- **{escape(label.astext()) if label else ''}.** {body}".rstrip()]

    # ---------------------------------------------------------------- numbered statements
    def _headed(self, head: str, body: list, first: nodes.Node | None) -> list:
        """A bold head run into the statement's first paragraph, as a book prints it."""
        if body and isinstance(body[0], str) and isinstance(first, nodes.paragraph):
            return [f"{head} {body[0]}"] + body[1:]
        return _join([[head], body])

    @staticmethod
    def _content(node: nodes.Element) -> list[nodes.Node]:
        """The statement's body: sphinx-proof and sphinx-exercise wrap it in one untitled section."""
        out = []
        for child in node.children:
            if isinstance(child, nodes.title):
                continue
            out.extend(child.children if isinstance(child, nodes.section) and not _titled(child) else [child])
        return out

    def _first_paragraph(self, content: list[nodes.Node]) -> nodes.Node | None:
        for child in content:
            if not isinstance(child, (nodes.Invisible, nodes.system_message)):
                return child
        return None

    def proof_statement(self, node: nodes.Element) -> list:
        """sphinx-proof's theorem, lemma, definition, algorithm...: "**Theorem 2.1 (title).** ..."."""
        title = node.next_node(nodes.title)
        named = self.inline_children(title).strip() if title is not None else ""
        number = self.number(node.get("countertype", ""), node)
        head = " ".join(p for p in (node.get("realtype", "").title(), number, named) if p)
        content = self._content(node)
        return self._headed(f"**{head}.**", self.blocks(content), self._first_paragraph(content))

    def proof(self, node: nodes.Element) -> list:
        """sphinx-proof's proof: an admonition whose text starts with "Proof. "."""
        content = [c for box in node.children for c in (box.children if isinstance(box, nodes.Admonition) else [box])]
        lines = self.blocks(content)
        if lines and isinstance(lines[0], str) and lines[0].startswith("Proof. "):
            lines[0] = "*Proof.* " + lines[0][len("Proof. "):]
        return lines

    def exercise(self, node: nodes.Element) -> list:
        """sphinx-exercise's exercises and solutions: "**Exercise 2.1 (title).**", "**Solution to Exercise 2.1.**"."""
        title = node.next_node(nodes.title)
        named = " ".join(title.astext().split()) if title is not None else ""
        if node.tagname == "solution_node":
            head = named or "Solution"
        else:
            number = self.number("exercise", node) if node.tagname == "exercise_enumerable_node" else ""
            if named and not named.startswith("("):
                named = f"({named})"
            head = " ".join(p for p in ("Exercise", number, named) if p)
        content = self._content(node)
        return self._headed(f"**{escape(head)}.**", self.blocks(content), self._first_paragraph(content))

    def admonition(self, node: nodes.Element) -> list:
        """A note, tip, warning, `{admonition}`, dropdown...: a blockquote under its bold title."""
        title = node.next_node(nodes.title)
        if title is not None and title.parent is node:
            head = self.inline_children(title)
        else:
            head = admonitionlabels.get(node.tagname, node.tagname.replace("_", " ").capitalize())
        body = self.blocks(c for c in node.children if c is not title)
        return _prefix(_join([[f"**{head}**"], body]), "> ", "> ")

    # ---------------------------------------------------------------- inline
    def inline_children(self, node: nodes.Node) -> str:
        return "".join(self.inline(child) for child in node.children)

    def inline(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.Text):
            return escape(str(node))
        if isinstance(node, nodes.target):
            return self.inline_children(node)  # an anchor ({index} roles leave one), or a named link's text
        if isinstance(node, (nodes.Invisible, nodes.system_message)):
            return ""
        if isinstance(node, nodes.math):
            return f"${one_line_tex(node.astext())}$"
        if isinstance(node, nodes.literal):
            text = node.astext().replace("\n", " ")
            return f"`` {text} ``" if "`" in text else f"`{text}`"
        if isinstance(node, nodes.emphasis):
            return self._wrap("*", node)
        if isinstance(node, nodes.strong):
            return self._wrap("**", node)
        if isinstance(node, addnodes.download_reference):
            url = f"{self.baseurl}/_downloads/{node['filename']}" if self.baseurl and node.get("filename") else ""
            text = self.inline_children(node)
            return f"[{text}]({url})" if url else text
        if isinstance(node, nodes.reference):  # also numbered references ({numref}) and citations
            text, url = self.inline_children(node), self.url(node)
            return f"[{text}](<{url}>)" if url and " " in url else (f"[{text}]({url})" if url else text)
        if isinstance(node, addnodes.pending_xref):
            self.unresolved(node, "a reference Sphinx did not resolve")
            return self.inline_children(node)
        if isinstance(node, nodes.image):
            return self.image(node)
        if isinstance(node, nodes.raw):
            return node.astext() if node.get("format") == "html" else ""
        if isinstance(node, nodes.subscript):
            return f"<sub>{self.inline_children(node)}</sub>"
        if isinstance(node, nodes.superscript):
            return f"<sup>{self.inline_children(node)}</sup>"
        if isinstance(node, (nodes.footnote_reference, nodes.citation_reference)):
            return f"\\[{escape(node.astext())}\\]"
        if isinstance(node, nodes.problematic):
            self.unresolved(node, "markup Sphinx could not read")
            return escape(node.astext())
        if isinstance(node, (nodes.inline, nodes.abbreviation, nodes.title_reference, addnodes.literal_strong,
                             nodes.generated)):
            return self.inline_children(node)
        if isinstance(node, nodes.container):  # a glued output in running text
            return " ".join(line for line in self.blocks(node.children) if isinstance(line, str) and line)
        self.unresolved(node, f"no Markdown for an inline {node.tagname} node (book/_ext/publish.py)")
        return escape(node.astext())

    def _wrap(self, mark: str, node: nodes.Element) -> str:
        inner = self.inline_children(node)
        stripped = inner.strip()
        if not stripped:
            return inner
        lead, trail = inner[: len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()):]
        return f"{lead}{mark}{stripped}{mark}{trail}"  # "* x*" would not be emphasis
