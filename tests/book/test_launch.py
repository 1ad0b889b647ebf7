"""Every launch button of the built book opens a notebook that exists.

The buttons are read from each built page's header. For each, the test finds its target where
the button says it lives, and checks that it is a notebook:

* Colab: `.../github/<owner>/<repo>/blob/<branch>/<path>`; on the branch the site is published
  to (`speclab_site_branch`), `<path>` is a file of the built site, otherwise of the repository.
  Colab opens only `.ipynb`, so it must be one, and a valid notebook (nbformat);
* Binder: `...?urlpath=lab/tree/<path>` opens `<path>` of the repository in JupyterLab: a valid
  `.ipynb`, or a MyST text notebook (jupytext reads it, with a kernel) *and* `binder/postBuild`
  makes JupyterLab open such files as notebooks (the test runs it into a scratch home folder and
  reads the setting it writes);
* JupyterHub: only where `_config.yml` names a hub; the book names none, so no page may have one.

The repository is named once, `repository.url` of `_config.yml`: with none, no page has a launch button
(checked on the extension itself, with a stand-in for Sphinx's app). A notebook page's `.ipynb` download
is the notebook Colab opens (tests/book/test_published_notebooks.py checks what that notebook holds).

Every chapter's published notebook must hold the chapter's code, after a set-up cell. The last
test shows the check can fail: a Colab link to a chapter's `.md`, and one to a missing file.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, unquote, urlsplit

import jupytext
import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup

from bookpages import ROOT, chapter_pages
from browser import book_pages

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
SITE_BRANCH = CONFIG["sphinx"]["config"]["speclab_site_branch"]
REPO = urlsplit(CONFIG["repository"]["url"]).path.strip("/")


def launch_links(html: str) -> dict[str, str]:
    """The page's launch buttons: {"Binder": url, "Colab": url, ...}."""
    soup = BeautifulSoup(html, "html.parser")
    links = {}
    for a in soup.select(".dropdown-launch-buttons a, a[title^='Launch on']"):
        name = (a.get("title") or a.get_text()).replace("Launch on", "").strip()
        links[name] = a.get("href")
    return links


def is_notebook_file(path: Path) -> str | None:
    """None when `path` is a notebook JupyterLab (with jupytext) opens as one, else why not."""
    if not path.exists():
        return f"{path} does not exist"
    if path.suffix == ".ipynb":
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as err:  # noqa: BLE001 - any reason it is not a notebook
            return f"{path} is not a valid notebook: {err}"
        return None
    if path.suffix == ".md":
        nb = jupytext.read(path)
        if "kernelspec" not in nb.metadata or not any(c.cell_type == "code" for c in nb.cells):
            return f"{path} is not a text notebook (no kernel or no code cell)"
        return None
    return f"{path} is neither an .ipynb nor a MyST notebook"


def target_problems(name: str, url: str, html_root: Path) -> list[str]:
    parts = urlsplit(url)
    if name == "Colab":
        m = re.fullmatch(rf"/github/{re.escape(REPO)}/blob/([^/]+)/(.+)", parts.path)
        if not m:
            return [f"Colab link of another form: {url}"]
        branch, path = m.group(1), unquote(m.group(2))
        if not path.endswith(".ipynb"):
            return [f"Colab opens only .ipynb files: {url}"]
        base = html_root if branch == SITE_BRANCH else ROOT
        problem = is_notebook_file(base / path)
        return [problem] if problem else []
    if name == "Binder":
        urlpath = parse_qs(parts.query).get("urlpath", [""])[0]
        if not urlpath.startswith("lab/tree/"):
            return [f"Binder link without a file to open: {url}"]
        problem = is_notebook_file(ROOT / urlpath.removeprefix("lab/tree/"))
        return [problem] if problem else []
    return [f"an unexpected launch button {name}: {url}"]


def binder_viewers(tmp_path: Path) -> dict:
    """The default viewers binder/postBuild configures, run in a scratch home folder."""
    env = dict(os.environ, HOME=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path / ".jupyter"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run(["bash", str(ROOT / "binder" / "postBuild")], cwd=ROOT, env=env, check=True, capture_output=True)
    settings = json.loads((tmp_path / ".jupyter" / "labconfig" / "default_setting_overrides.json").read_text())
    return settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]


def test_binder_opens_the_books_markdown_as_notebooks(tmp_path):
    viewers = binder_viewers(tmp_path)
    assert viewers.get("markdown") == "Jupytext Notebook" and viewers.get("myst") == "Jupytext Notebook"
    requirements = (ROOT / "binder" / "requirements.txt").read_text() + (ROOT / "requirements.txt").read_text()
    assert "jupytext" in requirements


@pytest.mark.slow
def test_every_launch_button_opens_an_existing_notebook(html_root):
    assert "jupyterhub_url" not in CONFIG["launch_buttons"], "the book names no hub; a course adds its own"
    problems, seen = [], 0
    for page in book_pages(html_root):
        html = page.read_text()
        assert "example.edu" not in html, f"{page.name}: a placeholder address"
        links = launch_links(html)
        source = ROOT / page.relative_to(html_root).with_suffix(".md")
        notebook_page = source.exists() and "kernelspec" in jupytext.read(source).metadata
        if notebook_page:
            missing = {"Binder", "Colab"} - set(links)
            if missing:
                problems.append(f"{page.name}: no {', '.join(sorted(missing))} button")
        for name, url in links.items():
            seen += 1
            problems += [f"{page.name}: {p}" for p in target_problems(name, url, html_root)]
    assert seen >= 2 * 12, f"only {seen} launch buttons found"
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_a_lab_page_launches_its_student_notebook(html_root):
    links = launch_links((html_root / "book" / "labs" / "lab1.html").read_text())
    assert links["Colab"].endswith("/labs/lab1/lab1.ipynb") and links["Binder"].endswith("lab/tree/labs/lab1/lab1.ipynb")


@pytest.mark.slow
def test_every_chapter_is_published_as_its_code_in_a_notebook(html_root):
    for page in chapter_pages(html_root):
        source = jupytext.read(ROOT / "book" / f"{page.stem}.md")
        published = nbformat.read(html_root / "notebooks" / "book" / f"{page.stem}.ipynb", as_version=4)
        nbformat.validate(published)
        code = [c.source for c in published.cells if c.cell_type == "code"]
        assert "speclab-setup" in published.cells[0].metadata.get("tags", [])
        assert code[1:] == [c.source for c in source.cells if c.cell_type == "code"], page.stem
    for lab in sorted((ROOT / "labs").glob("*/*.ipynb")):
        assert (html_root / "notebooks" / "labs" / lab.name).read_bytes() == lab.read_bytes()


@pytest.mark.slow
def test_every_page_offers_the_whole_book_pdf(html_root):
    for page in book_pages(html_root):
        soup = BeautifulSoup(page.read_text(), "html.parser")
        hrefs = [a.get("href") for a in soup.select("a.btn-download-book-pdf-button")]
        assert hrefs and all(h.endswith("speclab.pdf") for h in hrefs), page.name
        assert (page.parent / hrefs[0]).resolve() == (html_root / "speclab.pdf").resolve()
        assert not soup.select(".btn-download-pdf-button"), f"{page.name}: the one-page print button is still there"


def test_the_check_refuses_a_colab_link_to_markdown_or_to_nothing(tmp_path):
    colab = f"https://colab.research.google.com/github/{REPO}/blob/main/"
    assert target_problems("Colab", colab + "book/03_exactness.md", tmp_path) == [
        f"Colab opens only .ipynb files: {colab}book/03_exactness.md"]
    assert "does not exist" in target_problems("Colab", colab + "book/03_exactness.ipynb", tmp_path)[0]
    assert target_problems("Colab", f"https://colab.research.google.com/github/{REPO}/blob/main/labs/lab1/lab1.ipynb",
                           tmp_path) == []
    binder = f"https://mybinder.org/v2/gh/{REPO}/main?urlpath=lab/tree/book/notation.md"
    assert "not a text notebook" in target_problems("Binder", binder, tmp_path)[0]
    assert target_problems("JupyterHub", "https://jupyterhub.example.edu/hub", tmp_path)


def fake_app(repository_url: str) -> SimpleNamespace:
    """What launch_targets and header_buttons read of Sphinx's app: the theme's options (as Jupyter Book
    makes them from _config.yml) and which pages are notebooks."""
    theme = {"repository_url": repository_url, "repository_branch": "main", "launch_buttons": CONFIG["launch_buttons"]}
    return SimpleNamespace(config=SimpleNamespace(html_theme_options=theme, speclab_site_branch=SITE_BRANCH),
                           env=SimpleNamespace(metadata={"book/02_acceptance": {"kernelspec": {"name": "python3"}}}))


def speclab_book():
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import speclab_book as module

    return module


def test_the_launch_buttons_follow_the_one_repository_setting():
    launch_targets = speclab_book().launch_targets
    buttons = launch_targets(fake_app("https://github.com/someone/fork"), "book/02_acceptance")
    assert {b["text"] for b in buttons} == {"Binder", "Colab"}
    assert all("/someone/fork/" in b["url"] for b in buttons), buttons
    assert launch_targets(fake_app(""), "book/02_acceptance") == []


def test_without_a_repository_the_page_has_no_launch_menu_and_downloads_the_published_notebook():
    context = {"pathto": lambda path, resource: f"../{path}", "header_buttons": [
        {"label": "launch-buttons", "buttons": [{"label": "launch-binder-button", "url": "https://mybinder.org"}]},
        {"label": "download-buttons", "buttons": [
            {"label": "download-notebook-button", "url": "../_sources/book/02_acceptance.ipynb"},
            {"label": "download-source-button", "url": "../_sources/book/02_acceptance.md"}]},
    ]}
    speclab_book().header_buttons(fake_app(""), "book/02_acceptance", "page.html", context, None)
    assert [g["label"] for g in context["header_buttons"]] == ["download-buttons"]
    urls = {b["label"]: b["url"] for b in context["header_buttons"][0]["buttons"]}
    assert urls["download-notebook-button"] == "../notebooks/book/02_acceptance.ipynb"
    assert urls["download-source-button"] == "../_sources/book/02_acceptance.md"
