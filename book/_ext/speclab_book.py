"""speclab's own Sphinx extension for the book (loaded from _config.yml, `local_extensions`).

What it adds to Jupyter Book 1's build, each step a function below:

* **Launch buttons that open a notebook.** Colab opens only ``.ipynb`` files, so every chapter
  is also published as a plain notebook at ``notebooks/<page>.ipynb`` of the built site: the page
  as the build rendered it, in Markdown any Jupyter reads (glued values, numbered theorems, links
  to the site; ``book/_ext/publish.py``), the outputs the build computed, and a first cell that
  installs the course where it is missing. The Colab button points there, on the branch the site
  is published from (``speclab_site_branch``, gh-pages), and so does the page's ``.ipynb``
  download. Binder opens the chapter's MyST source in a checkout of the repository, which
  ``binder/postBuild`` makes open as a notebook (jupytext's viewer). A lab's page launches the
  lab's student notebook, ``labs/<lab>/<lab>.ipynb``. A JupyterHub button appears only when
  ``launch_buttons.jupyterhub_url`` names a hub. Every button needs ``repository.url`` of
  ``_config.yml`` (the one place the repository is named): without it no page has any.
* **A whole-book PDF** in the download menu (``speclab.pdf``, written by ``make pdf``; see
  ``book/_ext/print_pdf.py``) instead of the browser's print dialog of one page.
* **One measurement per build.** The environment variable ``SPECLAB_LIVE_MEASUREMENTS`` names
  the file where ``speclab.measurements`` keeps this build's measurements; it lives as long as
  the execution cache (a build that starts without a cache starts without measurements). The
  measurements' own diagnostics go to the build log, never to a page.
* **The execution report** (``{speclab-execution-report}``): each page's execution time and
  date, the machine, and whether the measurements it shows passed their checks.
* **Author-year labels in the bibliography**, the same as in the text ("Chen et al., 2023").
* **The version**, from the package, in every page's footer.
* The single-page builder (``make pdf``) renders every node the HTML builder can.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path
from urllib.parse import quote, urlencode

import nbformat
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

LOGGER = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[2]
LIVE_ENV = "SPECLAB_LIVE_MEASUREMENTS"
PDF_NAME = "speclab.pdf"
NOTEBOOKS = "notebooks"

# The first cell of every published chapter notebook: Colab (or any fresh Jupyter) has neither
# the course's package nor its files; inside a checkout of the repository it does nothing.
SETUP_CELL = '''# Set-up for running this chapter outside the course's repository (Colab, a fresh Jupyter):
# fetch the repository, install its package, and run from its book/ folder as the build does.
# In a checkout of the repository (`make setup`, Binder) the package is installed and this does nothing.
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("speclab") is None:
    subprocess.run(["git", "clone", "--depth", "1", "--branch", {branch!r}, {repo!r}, "speclab-course"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "speclab-course[hf]", "jupyterquiz", "myst-nb"],
                   check=True)
    os.chdir(os.path.join("speclab-course", "book"))
    sys.path.insert(0, os.path.abspath(".."))'''


# ------------------------------------------------------------------------------ helpers
def _theme(app: Sphinx) -> dict:
    return app.config.html_theme_options or {}


def _repo(app: Sphinx) -> tuple[str, str, str, str]:
    """(repository URL, owner, name, branch) from the book's `repository` settings."""
    theme = _theme(app)
    url = (theme.get("repository_url") or "").rstrip("/")
    owner, name = (url.split("github.com/")[-1].split("/") + ["", ""])[:2] if "github.com/" in url else ("", "")
    return url, owner, name, theme.get("repository_branch") or "main"


def _is_notebook(app: Sphinx, docname: str) -> bool:
    return "kernelspec" in app.env.metadata.get(docname, {})


def lab_notebook(docname: str) -> str | None:
    """The repository path of the student notebook a lab page stands for (book/labs/lab1 -> labs/lab1/lab1.ipynb)."""
    parts = docname.split("/")
    if len(parts) == 3 and parts[:2] == ["book", "labs"] and parts[2] != "index":
        path = f"labs/{parts[2]}/{parts[2]}.ipynb"
        if (ROOT / path).exists():
            return path
    return None


def launch_targets(app: Sphinx, docname: str) -> list[dict]:
    """The launch buttons of one page: (text, url, where the target lies, its path there)."""
    repo_url, owner, name, branch = _repo(app)
    launch = _theme(app).get("launch_buttons", {}) or {}
    if not (owner and name):
        return []
    site_branch = app.config.speclab_site_branch
    lab = lab_notebook(docname)
    source = lab or f"{docname}.md"  # what Binder and a hub open: a file of the repository
    colab_branch, colab_path = (branch, lab) if lab else (site_branch, f"{NOTEBOOKS}/{docname}.ipynb")
    buttons = []
    binder = (launch.get("binderhub_url") or "").rstrip("/")
    if binder:
        buttons.append({"text": "Binder", "icon": "_static/images/logo_binder.svg", "where": "repository", "path": source,
                        "url": f"{binder}/v2/gh/{owner}/{name}/{branch}?urlpath={quote('lab/tree/' + source)}"})
    hub = (launch.get("jupyterhub_url") or "").rstrip("/")
    if hub:
        query = urlencode({"repo": repo_url, "urlpath": f"lab/tree/{name}/{source}", "branch": branch}, safe="/")
        buttons.append({"text": "JupyterHub", "icon": "_static/images/logo_jupyterhub.svg", "where": "repository",
                        "path": source, "url": f"{hub}/hub/user-redirect/git-pull?{query}"})
    colab = (launch.get("colab_url") or "").rstrip("/")
    if colab:
        buttons.append({"text": "Colab", "icon": "_static/images/logo_colab.png",
                        "where": "repository" if lab else "site", "path": colab_path,
                        "url": f"{colab}/github/{owner}/{name}/blob/{colab_branch}/{colab_path}"})
    return buttons


# ---------------------------------------------------------------- page header buttons
def header_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Rewrite the theme's launch buttons (see launch_targets) and its one-page PDF button."""
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            group["buttons"] = [
                {"type": "link", "text": b["text"], "tooltip": f"Launch on {b['text']}", "icon": b["icon"],
                 "url": b["url"], "label": f"launch-{b['text'].lower()}-button"}
                for b in launch_targets(app, pagename)
            ]
        if group.get("label") == "download-buttons":
            notebook = published_notebook_path(app, pagename)
            for button in group["buttons"]:
                if button.get("label") == "download-notebook-button" and notebook:
                    button["url"] = context["pathto"](notebook, 1)  # the notebook Colab opens, not the MyST one
            group["buttons"] = [b for b in group["buttons"] if b.get("label") != "download-pdf-button"] + [{
                "type": "link", "text": "whole book (.pdf)", "tooltip": "Download the whole book as a PDF",
                "icon": "fas fa-file-pdf", "url": context["pathto"](PDF_NAME, 1), "label": "download-book-pdf-button",
            }]
    context["header_buttons"] = [g for g in context.get("header_buttons", [])
                                 if not (g.get("label") == "launch-buttons" and not g["buttons"])]


# ------------------------------------------------------------------- published notebooks
def published_notebook_path(app: Sphinx, docname: str) -> str | None:
    """The site's notebook for a page (lab pages: the lab's student notebook), or None."""
    lab = lab_notebook(docname)
    if lab:
        return f"{NOTEBOOKS}/labs/{Path(lab).name}"
    return f"{NOTEBOOKS}/{docname}.ipynb" if _is_notebook(app, docname) else None


def publish_notebooks(app: Sphinx, exception) -> None:
    """Write notebooks/<page>.ipynb for every notebook page (book/_ext/publish.py), and copy the labs'
    student notebooks to notebooks/labs/."""
    if exception is not None or app.builder.name != "html":
        return
    from publish import published_notebook

    repo_url, _, _, branch = _repo(app)
    out = Path(app.outdir) / NOTEBOOKS
    written = 0
    for docname in sorted(app.env.found_docs):
        if not _is_notebook(app, docname):
            continue
        nb = published_notebook(app, docname)
        setup = nbformat.v4.new_code_cell(SETUP_CELL.format(branch=branch, repo=repo_url + ".git"))
        setup.metadata["tags"] = ["speclab-setup"]
        nb.cells.insert(0, setup)
        target = out / f"{docname}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.validate(nb)
        nbformat.write(nb, target)
        written += 1
    for student in sorted((ROOT / "labs").glob("*/*.ipynb")):
        target = out / "labs" / student.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(student.read_bytes())
        written += 1
    LOGGER.info(f"speclab: {written} notebooks published under {NOTEBOOKS}/")


# ---------------------------------------------------------------- live measurements
def live_measurements_path(app: Sphinx) -> Path:
    return Path(app.outdir).parent / ".speclab" / "live-measurements.json"


def start_live_measurements(app: Sphinx, config) -> None:
    """Point speclab.measurements (in every kernel the build starts) at this build's file, and drop
    the file when the execution cache is gone: measurements live exactly as long as cached outputs."""
    path = live_measurements_path(app)
    cache = Path(config.nb_execution_cache_path) if config.nb_execution_cache_path else Path(app.outdir).parent / ".jupyter_cache"
    app.speclab_no_cache = not cache.exists()
    if app.speclab_no_cache and path.exists():
        path.unlink()
    os.environ[LIVE_ENV] = str(path)


def reread_without_cache(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Without an execution cache (a first build, or `make` dropped it because the package or the
    reference measurements changed), every page is read, and so executed, again: Sphinx alone
    would re-read only the pages whose sources changed and keep showing the others' old outputs."""
    if getattr(app, "speclab_no_cache", False):
        return sorted(set(env.found_docs) - set(added) - set(changed))
    return []


def read_live(app: Sphinx) -> dict:
    path = live_measurements_path(app)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def log_measurement_notes(app: Sphinx, exception) -> None:
    """The build machine's measurement diagnostics: to the build log, not to the pages."""
    if exception is not None:
        return
    for name, result in sorted(read_live(app).get("quantities", {}).items()):
        state = "passed its checks" if result.get("stable") else "did NOT pass its checks"
        load = (result.get("load_average") or {}).get("before")
        LOGGER.info(f"speclab: measurement {name!r} ({result.get('measured_at')}, load {load}) {state}")
        for note in result.get("notes", []):
            LOGGER.info(f"speclab: {name}: {note}")


# ------------------------------------------------------------------ the execution report
class ExecutionReportNode(nodes.General, nodes.Element):
    """Placeholder, replaced by the report once every page has been executed."""


class ExecutionReport(SphinxDirective):
    has_content = False

    def run(self):
        self.env.speclab_report_docs = getattr(self.env, "speclab_report_docs", set()) | {self.env.docname}
        return [ExecutionReportNode()]


def _build_machine() -> str:
    """This machine, named as speclab.measure names the devices its timings ran on."""
    try:
        from speclab.measure import device_name

        return device_name("cpu")
    except Exception:  # noqa: BLE001 - the report names the machine however it can
        return f"{platform.system()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def _cell(text: str) -> nodes.entry:
    return nodes.entry("", nodes.paragraph(text=text))


def report_table(app: Sphinx, docname: str) -> nodes.table:
    from myst_nb.sphinx_ import NbMetadataCollector

    live = read_live(app)
    quantities = live.get("quantities", {})
    uses = live.get("pages", {})
    header = ["page", "executed", "seconds", "mode", "machine", "measurements"]
    table = nodes.table(classes=["colwidths-auto"])
    group = nodes.tgroup(cols=len(header))
    table += group
    for _ in header:
        group += nodes.colspec(colwidth=1)
    head, body = nodes.thead(), nodes.tbody()
    group += head
    group += body
    row = nodes.row()
    for h in header:
        row += _cell(h)
    head += row
    data = NbMetadataCollector.get_doc_data(app.env)
    for doc in sorted(data):
        exec_data = data[doc].get("exec_data")
        if not exec_data:
            continue
        page = doc.split("/")[-1]
        used = uses.get(page, [])
        machines = sorted({quantities[q]["machine"]["device"] for q in used if q in quantities})
        if used:
            verdicts = []
            for q in used:
                r = quantities.get(q, {})
                load = (r.get("load_average") or {}).get("before")
                verdicts.append(f"{q}: {'stable' if r.get('stable') else 'not stable'}"
                                + (f" (load {load[0]:.2f})" if load else ""))
            measured = "; ".join(verdicts)
        else:
            measured = "none"
        when = dt.datetime.fromtimestamp(exec_data["mtime"]).strftime("%Y-%m-%d %H:%M") if exec_data.get("mtime") else ""
        runtime = "-" if exec_data.get("runtime") is None else f"{exec_data['runtime']:.1f}"
        status = exec_data.get("method", "") + ("" if exec_data.get("succeeded") else ", failed")
        row = nodes.row()
        link = nodes.reference("", doc.removeprefix("book/"), internal=True,
                               refuri=app.builder.get_relative_uri(docname, doc))
        entry = nodes.entry("", nodes.paragraph("", "", link))
        row += entry
        for text in (when, runtime, status, ", ".join(machines) or _build_machine(), measured):
            row += _cell(text)
        body += row
    return table


class ExecutionReportTransform(SphinxPostTransform):
    default_priority = 8

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(ExecutionReportNode)):
            node.replace_self(report_table(self.app, self.env.docname))


def refresh_report(app: Sphinx, env) -> list[str]:
    """Re-write the report's page whenever any page was read (its numbers may have changed)."""
    return sorted(getattr(env, "speclab_report_docs", set()))


# ------------------------------------------------------------------- bibliography labels
def register_bibliography_style() -> None:
    """A pybtex style whose labels read like the citations in the text: "Chen et al., 2023"."""
    from pybtex.plugin import register_plugin
    from pybtex.style.formatting.unsrt import Style as UnsrtStyle
    from pybtex.style.labels import BaseLabelStyle

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            for entry in sorted_entries:
                people = entry.persons.get("author") or entry.persons.get("editor") or []
                last = [" ".join(p.last_names) for p in people]
                if not last:
                    names = entry.fields.get("organization", entry.key)
                elif len(last) == 1:
                    names = last[0]
                elif len(last) == 2:
                    names = f"{last[0]} and {last[1]}"
                else:
                    names = f"{last[0]} et al."
                yield f"{names}, {entry.fields.get('year', 'n.d.')}".replace("{", "").replace("}", "")

    class AuthorYearStyle(UnsrtStyle):
        default_label_style = AuthorYearLabels
        default_sorting_style = "author_year_title"

    register_plugin("pybtex.style.formatting", "speclab_author_year", AuthorYearStyle)


# ---------------------------------------------------------------------------- version
def book_version() -> tuple[str, str]:
    """(the package's version, the commit the book was built from or '')."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("speclab")
    except PackageNotFoundError:
        release = "unknown"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return release, commit


def set_version(app: Sphinx, config) -> None:
    release, commit = book_version()
    config.version = config.release = release
    built = dt.date.today().isoformat()
    theme = dict(config.html_theme_options or {})
    footer = theme.get("extra_footer", "")
    changes = (f'<a href="https://github.com/{_repo_path(theme)}/blob/{theme.get("repository_branch") or "main"}'
               f'/CHANGELOG.md">CHANGELOG</a>' if _repo_path(theme) else "<code>CHANGELOG.md</code>")
    theme["extra_footer"] = (f'<p class="speclab-version">speclab {release}'
                             + (f", commit {commit}" if commit else "") + f", built {built}. "
                             f'Changes: {changes}; how to cite: <code>CITATION.cff</code>.</p>' + footer)
    config.html_theme_options = theme


def _repo_path(theme: dict) -> str:
    url = (theme.get("repository_url") or "").rstrip("/")
    return url.split("github.com/")[-1] if "github.com/" in url else ""


# -------------------------------------------------------------------- single-page HTML
def share_html_handlers(app: Sphinx) -> None:
    """Let the single-page builder render every node the HTML builder can.

    Sphinx takes a builder's node handlers from its name ("singlehtml") when any extension
    registered one under that name, and then ignores those registered for its format ("html"),
    such as MyST-NB's collapsed-cell node. Merging the two keeps both.
    """
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    merged = dict(handlers.get("html", {}))
    merged.update(handlers.get("singlehtml", {}))
    handlers["singlehtml"] = merged


def one_of_each_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop a page's repeated scripts. sphinx-thebe adds its inline configuration, `const THEBE_JS_URL = ...`,
    once per reading of the sources, and jupyter-book reads them twice: the second copy declared the constant
    again, a SyntaxError that every page logged (tests/book/test_rendering.py). The copies differ only in how
    Sphinx stored the missing file name of an inline script (None when added to the builder, '' when copied
    from the registry), so a script is known by its file name or '' and its attributes (its body included)."""
    seen, kept = set(), []
    for script in context.get("script_files", []):
        name = getattr(script, "filename", script) or ""
        key = (str(name), tuple(sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    if "script_files" in context:
        context["script_files"] = kept


def kernel_as_written(app: Sphinx, doctree: nodes.document) -> None:
    """Give the page back the kernel its source names. The build runs every page in the kernel `speclab-book`
    (_config.yml's `nb_kernel_rgx_aliases`, book/_kernel/), and myst-nb stores the renamed kernel spec as the
    page's metadata, which the page's Thebe configuration, its launch buttons and its published notebook
    read. Those are for readers, whose Colab or Binder has `python3`, not the build's kernel."""
    import jupytext

    docname = app.env.docname
    metadata = app.env.metadata.get(docname, {})
    if "kernelspec" in metadata:
        source = jupytext.read(app.env.doc2path(docname))
        if "kernelspec" in source.metadata:
            metadata["kernelspec"] = dict(source.metadata["kernelspec"])


def setup(app: Sphinx) -> dict:
    app.add_config_value("speclab_site_branch", "gh-pages", "html")
    register_bibliography_style()
    app.connect("config-inited", start_live_measurements, priority=100)
    app.connect("config-inited", set_version)
    app.connect("builder-inited", share_html_handlers)
    app.connect("env-get-outdated", reread_without_cache)
    app.connect("doctree-read", kernel_as_written)
    app.connect("html-page-context", header_buttons, priority=600)  # after the theme's (501)
    app.connect("html-page-context", one_of_each_script, priority=900)
    app.add_node(ExecutionReportNode)
    app.add_directive("speclab-execution-report", ExecutionReport)
    app.add_post_transform(ExecutionReportTransform)
    app.connect("env-updated", refresh_report)
    app.connect("build-finished", publish_notebooks)
    app.connect("build-finished", log_measurement_notes)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
