"""No dead definitions: every module-level function, class, constant and method of the course's code
(speclab/, autograder/, book/_ext/, benchmarks/) is named somewhere else in the repository (its code,
tests, notebooks, templates, Makefile or docs).

An AST scan, not a call graph: a name written anywhere else counts as a use, so it misses a definition
whose name is also a common word, but it never calls a used definition dead. A name used only through
getattr or a string still counts, as long as the string is written out.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("speclab", "autograder", "book/_ext", "benchmarks")
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".j2", ".toml", ".cfg", ".yml", ".yaml", ".sh", ".txt", ".json", ".html",
                 ".css", ".js", ".tex"}
SKIP = {".venv", "_build", ".git", "node_modules", "speclab.egg-info", "__pycache__"}
ENTRY_POINTS = {"main", "setup"}  # called by Python's -m or by Sphinx, by convention


def definitions(source: str) -> list[tuple[str, int]]:
    """(name, line) of each module-level function, class and constant, and each class's own methods."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, node.lineno))
            if isinstance(node, ast.ClassDef):
                out += [(sub.name, sub.lineno) for sub in node.body
                        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))]
        elif isinstance(node, ast.Assign):
            out += [(t.id, node.lineno) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.append((node.target.id, node.lineno))
    return [(name, line) for name, line in out if not name.startswith("__") and name not in ENTRY_POINTS]


def unused(code: dict[str, str], texts: list[str]) -> list[str]:
    """`path:line: name` of each definition in code (path -> source) named only once in all of texts."""
    counts = Counter(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(texts)))
    return [f"{path}:{line}: {name}" for path, source in code.items() for name, line in definitions(source)
            if counts[name] <= 1]


def repository() -> tuple[dict[str, str], list[str]]:
    code = {str(p.relative_to(ROOT)): p.read_text() for top in CODE for p in sorted((ROOT / top).rglob("*.py"))}
    texts = []
    for path in ROOT.rglob("*"):
        if SKIP & set(path.relative_to(ROOT).parts) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name == "Makefile":
            try:
                texts.append(path.read_text())
            except (UnicodeDecodeError, OSError):
                continue
    return code, texts


def test_no_definition_is_dead():
    code, texts = repository()
    dead = unused(code, texts)
    assert not dead, "defined but never used anywhere in the repository (delete them):\n" + "\n".join(dead)


def test_the_scan_finds_a_dead_function_constant_and_method():
    code = {"m.py": "X_UNUSED = 1\nUSED = 2\n\ndef gone():\n    return USED\n\n\nclass K:\n"
                    "    def idle(self):\n        pass\n\n    def __init__(self):\n        pass\n"}
    texts = [code["m.py"], "K()"]
    assert unused(code, texts) == ["m.py:1: X_UNUSED", "m.py:4: gone", "m.py:9: idle"]
