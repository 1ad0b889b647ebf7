"""Feedback a student can read offline, and the per-test verdicts that Gradescope shows.

One HTML page per student and notebook (`render_page`), written by `write_feedback` for a
class (only for students whose result or graded notebook changed since the last run):
- math is typeset by a copy of MathJax 3 inlined into the page (the `sphinx-mathjax-offline`
  package's bundle), so the page needs no network and can be mailed as one file;
- a box at the top gives the points, one row per test cell (its part, every rule its checks
  enforce, a timing that gave no clear verdict) and the grader's notes;
- each test cell is headed by its part, what it checks and its points; its hidden tests are
  cut from the source shown, and an error shows only its type and message (a traceback
  would print the hidden lines);
- a message is shown whole: its first line (or first sentences) in view, the rest folded
  in a <details> element, never dropped (autograder/inside/recheck.py `capped` stops only abuse).
The verdicts (`cell_verdicts`) and names (`describe_cells`) are shared with the Gradescope
results, so both say the same thing.
"""
from __future__ import annotations

import ast
import hashlib
import html
import json
import os
import re
import secrets
from functools import lru_cache
from pathlib import Path

from autograder.checks import HIDDEN_BEGIN, HIDDEN_END
from autograder.checks.timing import UNDECIDED_MARK
from autograder.inside.recheck import capped
from autograder.sandbox import Limits

from .results import PENDING_MARK

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
RENDER_VERSION = "7"  # bump when the page changes, so that cached pages are written again
TEMPLATES = Path(__file__).with_name("templates")


# ----------------------------------------------------------------------------- names
def _read_nb(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def _source_cells(course: Path, lab: str, name: str) -> dict[str, str]:
    """grade id -> source of that cell in the instructor's notebook (ipynb, or MyST markdown via jupytext)."""
    folder = course / "solutions" / lab
    try:
        if (folder / f"{name}.ipynb").exists():
            nb = _read_nb(folder / f"{name}.ipynb")
        elif (folder / f"{name}.md").exists():
            import jupytext

            nb = jupytext.read(folder / f"{name}.md")
        else:
            return {}
    except Exception:  # noqa: BLE001 - names then fall back to the grade ids
        return {}
    out = {}
    for cell in nb["cells"]:
        gid = ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")
        if gid:
            src = cell.get("source", "")
            out[gid] = "".join(src) if isinstance(src, list) else src
    return out


@lru_cache(maxsize=8)
def _check_docs(module_path: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """check function -> (the first paragraph of its docstring, module constants substituted; the
    module's other check functions it calls). No import: the checks import torch, which
    the grader process does not need."""
    try:
        tree = ast.parse(Path(module_path).read_text())
    except (OSError, SyntaxError):
        return {}
    consts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float)):
                consts[node.targets[0].id] = f"{node.value.value:g}"
    docs = {}
    checks = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in checks:
            paragraph = " ".join(ln.strip() for ln in (ast.get_docstring(node) or "").strip().split("\n\n")[0].splitlines())
            text = re.sub(r"\b[A-Z][A-Z0-9_]{2,}\b", lambda m: consts.get(m.group(), m.group()), paragraph)
            called = [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                      and n.func.id in checks and n.func.id != node.name]
            docs[node.name] = (text, tuple(dict.fromkeys(called)))
    return docs


def _rules(docs: dict[str, tuple[str, tuple[str, ...]]], check: str, seen: set[str]) -> list[str]:
    """What check enforces: its own docstring's first paragraph, then those of the checks it calls."""
    if check in seen or check not in docs:
        return []
    seen.add(check)
    text, called = docs[check]
    out = [text] if text else []
    for c in called:
        out += _rules(docs, c, seen)
    return out


def _lab_docs(course: Path, lab: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    docs = _check_docs(str(course / "autograder" / "checks" / f"{lab}.py"))
    if not docs:  # a course without its own copy of the package, or a lab whose checks live elsewhere
        import importlib.util

        try:
            spec = importlib.util.find_spec(f"autograder.checks.{lab}")
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            docs = _check_docs(spec.origin)
    return docs


@lru_cache(maxsize=8)
def _spec_rules(lab: str) -> dict[str, list[str]]:
    """grade id -> the texts of the rules its `CellSpec` declares (autograder.checks.<lab>.CELLS, the
    rules the notebook states to the student); {} for a lab without them or that cannot be imported."""
    import importlib

    try:
        cells = getattr(importlib.import_module(f"autograder.checks.{lab}"), "CELLS", [])
        return {str(c.grade_id): [str(getattr(r, "text", r)) for r in c.rules] for c in cells if getattr(c, "rules", ())}
    except Exception:  # noqa: BLE001 - a lab without CellSpecs, or whose checks need what is not installed
        return {}


def cell_rules(course: Path, lab: str, release_nb: dict, name: str | None = None) -> dict[str, list[str]]:
    """grade id of each test cell -> every rule its hidden tests enforce, in words for the student:
    the rules its `CellSpec` declares (autograder/checks/<lab>.py `CELLS`), or, for a lab without
    them, the first docstring paragraph of each check the cell calls and of each check those call in
    turn, each once; [] where the cell calls no documented check."""
    declared = _spec_rules(lab)
    sources = _source_cells(course, lab, name or lab)
    docs = _lab_docs(course, lab)
    out: dict[str, list[str]] = {}
    for cell in release_nb.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        gid = meta.get("grade_id")
        if not (meta.get("grade") and not meta.get("solution") and gid):
            continue
        seen: set[str] = set()
        out[gid] = declared.get(gid) or [r for check in re.findall(r"_checks\.(check_\w+)\(", sources.get(gid, ""))
                                         for r in _rules(docs, check, seen)]
    return out


def describe_cells(course: Path, lab: str, release_nb: dict, name: str | None = None) -> dict[str, tuple[str, str]]:
    """grade id of each test cell -> (its part, what it checks), in notebook order.

    The part is the last `Part ...` heading above the cell (points in brackets dropped); what it
    checks is the first docstring paragraph of the hidden check the cell calls first
    (autograder/checks/<lab>.py), else the rules its CellSpec declares, else the grade id in words
    (`cell_rules` lists every rule).
    """
    sources = _source_cells(course, lab, name or lab)
    docs = _lab_docs(course, lab)
    declared = _spec_rules(lab)
    out: dict[str, tuple[str, str]] = {}
    part = ""
    for cell in release_nb.get("cells", []):
        text = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            for line in text.splitlines():
                m = re.match(r"#{1,3}\s+(Part\s+\d+.*)", line)
                if m:
                    part = re.sub(r"\s*\(\d+(\.\d+)?\s+points?\)\s*$", "", m.group(1)).strip()
            continue
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        gid = meta.get("grade_id")
        if not (meta.get("grade") and not meta.get("solution") and gid):
            continue
        what = ""
        # the check that the cell's hidden tests call (autograder/checks/<lab>.py)
        m = re.search(r"_checks\.(check_\w+)\(", sources.get(gid, ""))
        if m and m.group(1) in docs:
            what = docs[m.group(1)][0]
        what = what or " ".join(declared.get(gid, []))  # a check without a docstring: the rules it declares
        out[gid] = (part or "Test", what or gid.removeprefix("test_").replace("_", " "))
    return out


# ----------------------------------------------------------------------------- verdicts
def _error_text(output: dict) -> str:
    ename = output.get("ename", "Error")
    if ename == "KeyboardInterrupt":
        return "stopped at the cell time limit"
    evalue = ANSI.sub("", str(output.get("evalue", ""))).strip()
    return f"{ename}: {evalue}" if evalue else ename


def cell_verdicts(nb: dict | None, tests: dict[str, str] | None = None) -> dict[str, str]:
    """grade id -> the message of its failure in the graded notebook ('' when it raised nothing): the first
    cell of each grade id whose code is the release's (`tests`, as `student_view` knows test cells).

    Only the exception's type and message: a traceback would show the hidden lines."""
    out: dict[str, str] = {}
    for cell in (nb or {}).get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader") if isinstance(cell, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        if not (meta.get("grade") and not meta.get("solution") and isinstance(meta.get("grade_id"), str)) \
                or meta["grade_id"] in out:
            continue
        if tests is not None and not _same_code(_strip_hidden(_text(cell.get("source", ""))),
                                                tests.get(meta["grade_id"], "")):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        out[meta["grade_id"]] = capped(_error_text(errors[0])) if errors else ""
    return out


def notes_for(problems: list[str], gid: str) -> list[str]:
    """The grader's notes that concern one test cell."""
    return [p for p in problems if re.search(rf"(^|\s){re.escape(gid)}:", p)]


def cell_messages(verdict: str, problems: list[str], gid: str) -> list[str]:
    """What a student reads under one test cell: the failure's message, then the grader's notes
    on that cell that do not just repeat it."""
    out = [verdict] if verdict else []
    for note in notes_for(problems, gid):
        text = note.split(f"{gid}:", 1)[1].strip()
        if not (verdict and verdict.startswith(text[:150])):
            out.append(text)
    return out


# ----------------------------------------------------------------------------- the page
@lru_cache(maxsize=1)
def _mathjax_code() -> str | None:
    """MathJax 3 (TeX input, SVG output, every TeX extension bundled: nothing is fetched), or None."""
    try:
        from importlib.metadata import distribution

        path = Path(str(distribution("sphinx-mathjax-offline").locate_file(
            "sphinx-mathjax-offline/static/mathjax/tex-svg-full.js")))
        code = path.read_text()
    except Exception:  # noqa: BLE001 - not installed: the page falls back to nbconvert's CDN copy
        return None
    return code.replace("</script", "<\\/script")  # cannot end the inline script early


def mathjax_script(nonce: str = "") -> str | None:
    """MathJax 3, inlined as two scripts carrying the page's nonce (its CSP runs no other script)."""
    code = _mathjax_code()
    if code is None:
        return None
    config = ("window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], "
              "['\\\\[', '\\\\]']], processEscapes: true, processEnvironments: true}, svg: {fontCache: 'global'}, "
              "options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'}};")
    attr = f' nonce="{nonce}"' if nonce else ""
    return f"<script{attr}>{config}</script>\n<script{attr}>{code}</script>"


STYLE = """
.speclab-box{border:2px solid #2b6cb0;border-radius:8px;background:#f3f8fd;padding:0.8em 1.2em;margin:1em 0 1.5em;
  font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:15px;color:#1a202c}
.speclab-box h2{margin:0 0 0.4em;font-size:1.35em}
.speclab-box table{border-collapse:collapse;width:100%;margin:0.4em 0}
.speclab-box td,.speclab-box th{border-bottom:1px solid #cbd5e0;padding:0.25em 0.5em;text-align:left;vertical-align:top}
.speclab-box td.pts{white-space:nowrap;text-align:right}
.speclab-ok{color:#276749;font-weight:600}.speclab-fail{color:#c53030;font-weight:600}
.speclab-notes{background:#fffaf0;border-left:4px solid #dd6b20;padding:0.4em 0.8em;margin-top:0.6em}
.speclab-notes ul{margin:0.2em 0 0.2em 1.2em;padding:0}
.speclab-test{border-left:6px solid #2b6cb0;background:#edf2f7;padding:0.4em 0.8em;margin:1em 0 0.2em;
  font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px}
.speclab-test.fail{border-left-color:#c53030;background:#fff5f5}
.speclab-test .msg{font-family:monospace;white-space:pre-wrap;margin-top:0.3em}
.speclab-box details,.speclab-test details{margin:0.2em 0 0.2em 0.5em}
.speclab-box summary,.speclab-test summary{cursor:pointer;color:#2b6cb0;font-family:system-ui,-apple-system,'Segoe UI',sans-serif}
.speclab-rules{margin:0;padding-left:1.1em}
.speclab-timing{color:#975a16;margin-top:0.2em}
"""

HEAD_CHARS = 300  # a message longer than this shows its first sentences and folds the rest


def split_message(text: str, width: int = HEAD_CHARS) -> tuple[str, str]:
    """(what is shown, what is folded) of a message: its first line, or, when that is longer than
    width, its first sentences up to width characters (else its first words); '' folded when the
    message fits. head + rest give the message back (up to the whitespace at the cut)."""
    first, newline, more = text.partition("\n")
    if len(first) <= width:
        return first, more if newline else ""
    for mark in (". ", "; "):  # the end of a sentence, else of a clause, else of a word
        cut = first.rfind(mark, 0, width)
        if cut >= width // 3:
            cut += 1
            break
    else:
        cut = first.rfind(" ", 0, width)
    if cut <= 0:
        cut = width
    rest = first[cut:].lstrip()
    return first[:cut].rstrip(), rest + ("\n" + more if newline else "")


def _inline(text: str) -> str:
    """A rule's text, escaped, its `code` spans as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def message_html(text: str) -> str:
    """A message, escaped: the first line in view, the rest in a <details> element a student opens."""
    shown, folded = split_message(text)
    if not folded:
        return html.escape(text)
    return (f"{html.escape(shown)}<details><summary>the rest of this message ({len(folded)} characters)</summary>"
            f"{html.escape(folded)}</details>")



# ----------------------------------------------------------------------------- student content, as data
# A graded notebook is the student's: every cell's source, metadata and outputs. The page keeps of it only
# what it shows, each as text or through the sanitiser: cell metadata is dropped (its tags would reach class
# attributes, its `speclab` key could pose as the grader's own HTML), outputs keep only the MIME types below,
# their values joined into text, their metadata dropped (an image's width and height reach attributes), and
# execution counts are numbers. Every HTML fragment of the student's (Markdown, HTML output, raw cells) goes
# through `safe_html`, nh3 (the Rust `ammonia` sanitiser) used as its documentation says: no scripts, no
# event handlers, no styles; the grader's own fragments are raw cells marked with a nonce drawn per page.
OUTPUT_TYPES = ("text/plain", "text/markdown", "text/html", "text/latex", "image/png", "image/jpeg", "image/svg+xml")
GRADER_CLASS = "speclab"  # the grader's own classes start with it: never on a student's element


def _keep_class(tag: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter: a student's classes, less any of the grader's (a forged score box)."""
    if attribute != "class":
        return value
    kept = [c for c in value.split() if not c.lower().startswith(GRADER_CLASS)]
    return " ".join(kept) or None


def safe_html(fragment) -> str:
    """A fragment of the student's HTML made inert: the tags and URL schemes nh3 allows by default, `class`
    (less the grader's) on every tag for code highlighting, no `id`, `style` or event handler."""
    import nh3

    text = fragment.decode() if isinstance(fragment, bytes) else str(fragment)
    return nh3.clean(text, attributes={**nh3.ALLOWED_ATTRIBUTES, "*": {"class"}}, attribute_filter=_keep_class)


def _text(value) -> str:
    """An output's value as one string: nbformat keeps multi-line values as lists of lines."""
    return "".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _output(o: dict) -> dict | None:
    """One output of the student's notebook as the page shows it, or None when nothing of it can be shown."""
    kind = o.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": "stderr" if o.get("name") == "stderr" else "stdout",
                "text": _text(o.get("text", ""))}
    if kind == "error":
        return {"output_type": "error", "ename": str(o.get("ename", "Error")), "evalue": str(o.get("evalue", "")),
                "traceback": [str(t) for t in o.get("traceback", []) if isinstance(t, str)]}
    if kind in ("display_data", "execute_result"):
        data = {m: _text(v) for m, v in (o.get("data") or {}).items() if m in OUTPUT_TYPES}
        if not data:
            shown = ", ".join(sorted(str(m) for m in (o.get("data") or {})))[:200]
            return {"output_type": "stream", "name": "stdout", "text": f"(an output of type {shown}: not shown here)\n"}
        out = {"output_type": kind, "data": data, "metadata": {}}
        if kind == "execute_result":
            out["execution_count"] = _count(o.get("execution_count"))
        return out
    return None


def _cell(cell: dict, index: int) -> dict:
    """One cell of the student's notebook with nothing but what the page shows (module comment above); its id is
    its place in the notebook, never the student's (the same result renders the same page, but for its nonce)."""
    kind = cell.get("cell_type") if cell.get("cell_type") in ("code", "markdown", "raw") else "raw"
    out = {"cell_type": kind, "metadata": {}, "source": _text(cell.get("source", "")), "id": f"c{index:05d}"}
    if kind == "code":
        out["execution_count"] = _count(cell.get("execution_count"))
        out["outputs"] = [x for x in (_output(o) for o in cell.get("outputs", []) if isinstance(o, dict)) if x]
    return out


def _raw(html_text: str, nonce: str) -> dict:
    """The grader's own HTML, marked with the page's nonce (the template shows it as it is, and only it)."""
    return {"cell_type": "raw", "metadata": {"raw_mimetype": "text/html", "speclab": nonce},
            "source": html_text, "id": "speclab-" + hashlib.sha1(html_text.encode()).hexdigest()[:10]}


def _strip_hidden(source: str) -> str:
    out, hidden = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line:
            hidden = True
            continue
        if HIDDEN_END in line:
            hidden = False
            continue
        if not hidden:
            out.append(line)
    return "\n".join(out).rstrip()


def _same_code(a: str, b: str) -> bool:
    """Whether two cells hold the same code, blank lines and trailing spaces aside."""
    def norm(s: str) -> list[str]:
        return [line.rstrip() for line in s.splitlines() if line.strip()]
    return norm(a) == norm(b)


def release_tests(release_nb: dict) -> dict[str, str]:
    """grade id -> the source of that test cell in the release: what a graded notebook's test cell holds, its
    hidden tests aside (the page knows the test cells by it, not by metadata a student's cell can carry)."""
    out = {}
    for c in release_nb.get("cells", []):
        meta = c.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and meta.get("grade_id"):
            out[meta["grade_id"]] = _strip_hidden(_text(c.get("source", "")))
    return out


def student_view(nb: dict, verdicts: dict[str, str], scores: dict[str, float], layout: dict[str, float],
                 names: dict[str, tuple[str, str]], problems: list[str], nonce: str,
                 tests: dict[str, str] | None = None) -> dict:
    """The graded notebook as the student may see it: hidden tests cut from every cell, tracebacks reduced to
    their message, a heading above each test cell (the grader's HTML, marked with `nonce`), and of the
    student's cells only what the page shows (`_cell`). A test cell is known by its code, the release's
    (`tests`, from `release_tests`): a cell of the student's that carries a test cell's metadata is one of the
    student's cells, and only the first cell of each grade id gets its heading."""
    cells, headed = [], set()
    for index, original in enumerate(nb.get("cells", []) if isinstance(nb.get("cells"), list) else []):
        if not isinstance(original, dict):
            continue
        meta = (original.get("metadata") or {}).get("nbgrader") or {}
        meta = meta if isinstance(meta, dict) else {}
        cell = _cell(original, index)
        src = cell["source"]
        if HIDDEN_BEGIN in src:  # hidden tests are cut from any cell that holds them, whatever it claims to be
            cell["source"] = _strip_hidden(src) + "\n# (the grader's hidden checks ran here)"
        gid = meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None
        if meta.get("grade") and not meta.get("solution") and gid in layout and gid not in headed \
                and (tests is None or _same_code(_strip_hidden(src), tests.get(gid, ""))):
            headed.add(gid)
            cell["outputs"] = [o if o.get("output_type") != "error" else
                               {"output_type": "stream", "name": "stderr", "text": _error_text(o) + "\n"}
                               for o in cell.get("outputs", [])]
            part, what = names.get(gid, ("", gid))
            got, pts = scores.get(gid, 0.0), layout[gid]
            ok = got >= pts
            msgs = cell_messages(verdicts.get(gid, ""), problems, gid)
            cells.append(_raw(
                f'<div class="speclab-test{"" if ok else " fail"}" id="{html.escape(gid)}"><b>{html.escape(part)}</b>'
                f" &mdash; {_inline(what)} <span style='float:right' class='{'speclab-ok' if ok else 'speclab-fail'}'>"
                f"{got:g} / {pts:g} points</span>"
                + "".join(f'<div class="msg">{message_html(m)}</div>' for m in msgs if m) + "</div>", nonce))
        elif cell.get("cell_type") == "code":
            cell["outputs"] = [o if o.get("output_type") != "error" else
                               {"output_type": "stream", "name": "stderr",
                                "text": "\n".join(ANSI.sub("", t) for t in o.get("traceback", [])[-3:]) or _error_text(o)}
                               for o in cell.get("outputs", [])]
        cells.append(cell)
    return {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}


def summary_box(student: str, lab: str, result: dict, layout: dict, names: dict, rules: dict | None = None) -> str:
    """The box at the top of a page: the score; a row per test cell with its part, what it checks
    (every rule, when `rules` names several: notebook -> grade id -> rules) and a timing of the cell
    that gave no clear verdict; then the grader's notes."""
    rows = []
    for nb_name, cells in layout.items():
        for gid, pts in cells.items():
            got = result["scores"].get(nb_name, {}).get(gid, 0.0)
            part, what = names.get(nb_name, {}).get(gid, ("", gid))
            listed = (rules or {}).get(nb_name, {}).get(gid) or []
            checked = (f'<ul class="speclab-rules">{"".join(f"<li>{_inline(r)}</li>" for r in listed)}</ul>'
                       if len(listed) > 1 else _inline(listed[0] if listed else what))
            timed = "".join(f'<div class="speclab-timing">{html.escape(UNDECIDED_MARK)} {message_html(n)}</div>'
                            for n in (result.get("timing") or {}).get(nb_name, {}).get(gid, []))
            held = (result.get("pending") or {}).get(nb_name, {}).get(gid)
            if held:  # results.hold_pending: neither given nor taken
                timed += (f'<div class="speclab-timing">{html.escape(PENDING_MARK)} {held:g} point'
                          f'{"s" if held != 1 else ""} held back until your instructor times this cell again</div>')
            cls = "speclab-timing" if held else "speclab-ok" if got >= pts else "speclab-fail"
            shown = f"pending / {pts:g}" if held else f"{got:g} / {pts:g}"
            rows.append(f'<tr><td><a href="#{html.escape(gid)}">{html.escape(part)}</a></td><td>{checked}{timed}</td>'
                        f'<td class="pts {cls}">{shown}</td></tr>')
    notes = "".join(f"<li>{message_html(p)}</li>" for p in result.get("problems", []))
    notes_html = (f'<div class="speclab-notes" id="grader-notes"><b>Notes from the grader</b><ul>{notes}</ul></div>'
                  if notes else "")
    return (f'<style>{STYLE}</style><div class="speclab-box" id="speclab-summary">'
            f"<h2>{html.escape(lab)}: {result['score']:g} / {result['max_score']:g} points</h2>"
            f"<div>Feedback for <b>{html.escape(student)}</b>. The checks below are the grader's; each test "
            f"cell shows what it checks, your points and, when it failed, the grader's message.</div>"
            f"<table><tr><th>Part</th><th>What is checked</th><th class='pts'>Points</th></tr>{''.join(rows)}</table>"
            f"{notes_html}</div>")


class Renderer:
    """One nbconvert HTML exporter, reused for every page of a run (building it is the slow part)."""

    def __init__(self) -> None:
        from nbconvert import HTMLExporter

        self.mathjax = mathjax_script()
        # sanitize_html: nbconvert's documented switch (Markdown, HTML and Markdown outputs, raw cells go through
        # its clean_html filter; JavaScript outputs are not drawn); the filter is nh3's (`safe_html`)
        self.exporter = HTMLExporter(extra_template_basedirs=[str(TEMPLATES)], template_name="speclab_feedback",
                                     sanitize_html=True, filters={"clean_html": safe_html})

    def page(self, nb: dict, nonce: str) -> str:
        """The page of `nb`; `nonce` marks the grader's raw cells and its scripts (the page's CSP allows no other)."""
        import nbformat

        node = nbformat.from_dict(nb)
        body, _ = self.exporter.from_notebook_node(node, resources={
            "speclab_mathjax": (mathjax_script(nonce) or "") if self.mathjax else "",
            "speclab_nonce": nonce})
        return body


def render_page(renderer: Renderer, course: Path, lab: str, nb_name: str, result: dict, layout: dict,
                graded: Path | None, release: Path) -> str:
    release_nb = _read_nb(release)
    names = {nb_name: describe_cells(course, lab, release_nb, nb_name)}
    rules = {nb_name: cell_rules(course, lab, release_nb, nb_name)}
    try:
        nb = _read_nb(graded) if graded and graded.exists() else release_nb
    except (OSError, ValueError):
        nb = release_nb
    nonce, tests = secrets.token_hex(16), release_tests(release_nb)
    view = student_view(nb, cell_verdicts(nb, tests), result["scores"].get(nb_name, {}), layout[nb_name], names[nb_name],
                        [p.split(" ", 1)[1] if p.startswith(f"{nb_name}.ipynb ") else p for p in result["problems"]],
                        nonce, tests)
    view["cells"].insert(0, _raw(summary_box(result["student"], lab, result, {nb_name: layout[nb_name]}, names, rules),
                                 nonce))
    view["metadata"]["title"] = f"{lab}: feedback for {result['student']}"
    return renderer.page(view, nonce)


def _stamp(result: dict, graded: Path | None, mathjax: bool) -> str:
    h = hashlib.sha256(json.dumps(result, sort_keys=True).encode() + RENDER_VERSION.encode() + bytes([mathjax]))
    if graded and graded.exists():
        h.update(graded.read_bytes())
    return h.hexdigest()


def fallback_page(lab: str, nb_name: str, r: dict, err: Exception) -> str:
    """A page that says the score and why the full page is missing: what a student gets when their
    notebook cannot be drawn (the other students' pages are written as usual)."""
    score, max_score = r.get("score", 0), r.get("max_score", 0)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(lab)}: feedback</title></head>"
            f"<body><h1>{html.escape(lab)} / {html.escape(nb_name)}: {score:g} of {max_score:g} points</h1>"
            f"<p>The detailed page of this notebook could not be drawn ({html.escape(type(err).__name__)}: "
            f"{html.escape(str(err)[:500])}); your score above is complete. Your instructor has the grader's "
            f"log.</p></body></html>")


class PageTooLarge(ValueError):
    """A page that would take more of the output folder than a page may (Limits.kept_mb)."""


def write_feedback(out: Path, course: Path, lab: str, layout: dict, results: list[dict], progress: bool = True,
                   kept_mb: int = Limits.kept_mb) -> int:
    """OUT/feedback/<student>/<lab>/<notebook>.html for every result; pages whose inputs did not
    change are kept. A page larger than kept_mb MB is replaced by the score-only page, which says why.
    Returns the number of pages written."""
    from tqdm import tqdm

    release_dir = out / "template" / "labs" / lab
    todo = []
    for r in results:
        for nb_name in layout:
            graded = out / "autograded" / r["student"] / lab / f"{nb_name}.ipynb"
            page = out / "feedback" / r["student"] / lab / f"{nb_name}.html"
            stamp = page.with_suffix(".sha256")
            key = _stamp(r, graded, mathjax_script() is not None)
            if page.exists() and stamp.exists() and stamp.read_text() == key:
                continue
            todo.append((r, nb_name, graded, page, stamp, key))
    if not todo:
        return 0
    renderer = Renderer()
    for r, nb_name, graded, page, stamp, key in tqdm(todo, desc="feedback pages", unit="page", disable=not progress):
        try:
            text = render_page(renderer, course, lab, nb_name, r, layout, graded, release_dir / f"{nb_name}.ipynb")
            if len(text.encode()) > kept_mb << 20:
                text = fallback_page(lab, nb_name, r, PageTooLarge(
                    f"it would take {len(text.encode()) / 2**20:.0f} MB, more than the {kept_mb} MB a page may take"))
        except Exception as err:  # noqa: BLE001 - one page that cannot be drawn never stops the class's feedback
            text = fallback_page(lab, nb_name, r, err)
            key = ""  # no stamp: the next run tries the full page again
        page.parent.mkdir(parents=True, exist_ok=True)
        tmp = page.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, page)
        if key:
            stamp.write_text(key)
        else:
            stamp.unlink(missing_ok=True)
    return len(todo)
