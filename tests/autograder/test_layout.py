"""The trust zones hold: what each wing of the code may import (ARCHITECTURE.md, "What may import what").

Imports are read from the source (every `import` and `from ... import`, at any depth, relative ones
resolved), so a lazy import inside a function counts as much as one at the top.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# wing -> the project wings it may import (besides itself); a wing is a folder (or file) of the tree
ALLOWED = {
    "speclab": set(),
    "autograder.checks": {"speclab"},
    "autograder.sandbox": set(),
    "autograder.inside": {"autograder.checks", "speclab"},
    "autograder.authoring": {"autograder.checks", "speclab"},
    "autograder.pipeline": {"autograder.inside", "autograder.sandbox", "autograder.checks", "speclab"},
    # the student edition's answer scan runs the hidden checks beside the reference (never while grading)
    "autograder.export": {"autograder.pipeline", "autograder.authoring", "autograder.inside", "autograder.sandbox",
                          "autograder.checks", "speclab"},
    "autograder.audit": {"autograder.pipeline", "autograder.authoring", "autograder.inside", "autograder.sandbox",
                         "autograder.checks", "speclab"},
}
PROJECT = ("speclab", "autograder", "benchmarks")


def wing_of(module: str) -> str | None:
    """The wing a dotted module name belongs to (the longest match), or None outside the project."""
    if module.split(".")[0] not in PROJECT:
        return None
    for wing in sorted(ALLOWED, key=len, reverse=True):
        if module == wing or module.startswith(wing + "."):
            return wing
    return module.split(".")[0] if module.count(".") == 0 else ".".join(module.split(".")[:2])


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """Dotted names a module imports (relative imports resolved against its package)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)  # `from autograder import audit`
    return found


def violations(files: dict[str, str], packages: set[str] = frozenset()) -> list[str]:
    """'module imports other (wing -> wing)' for every import a wing may not make."""
    out = []
    for module, source in files.items():
        wing = wing_of(module)
        if wing not in ALLOWED:
            continue
        for name in sorted(imports_of(source, module, module in packages)):
            other = wing_of(name)
            if other is None or other == wing or other not in ALLOWED and other in ("autograder", "benchmarks"):
                continue
            if other not in ALLOWED[wing] and not (other == "autograder" and name == "autograder"):
                out.append(f"{module} imports {name} ({wing} -> {other})")
    return out


def project_files() -> tuple[dict[str, str], set[str]]:
    """(dotted module name -> source, the names that are packages) of speclab and autograder."""
    files, packages = {}, set()
    for top in ("speclab", "autograder"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            files[".".join(parts)] = path.read_text()
            if rel.name == "__init__":
                packages.add(".".join(parts))
    return files, packages


def test_every_wing_imports_only_what_it_may():
    assert violations(*project_files()) == []


@pytest.mark.parametrize("module, source, wing_to", [
    ("autograder.pipeline.grade", "from autograder.authoring import reference\n", "autograder.authoring"),
    ("autograder.pipeline.judge", "def f():\n    from autograder.audit import mutants\n", "autograder.audit"),
    ("autograder.inside.harness", "from ..pipeline import judge\n", "autograder.pipeline"),
    ("autograder.inside", "from .. import audit\n", "autograder.audit"),
    ("speclab.model", "import autograder.checks\n", "autograder.checks"),
    ("autograder.checks.lab1", "from autograder import audit\n", "autograder.audit"),
])
def test_the_rule_catches_an_import_across_a_wall(module, source, wing_to):
    found = violations({module: source}, {"autograder.inside"})
    assert found and found[0].endswith(f"-> {wing_to})"), found


def test_grading_never_loads_answers_or_wrong_solutions():
    """The rule above, said once more for the two wings that hold answers: nothing the pipeline, the
    sandbox or the code inside it imports, however indirectly, is a reference solution or a mutant."""
    files, packages = project_files()
    graph = {m: {n for n in imports_of(s, m, m in packages) if wing_of(n)} for m, s in files.items()}
    reached, todo = set(), [m for m in files if wing_of(m) in ("autograder.pipeline", "autograder.inside",
                                                             "autograder.sandbox")]
    while todo:
        m = todo.pop()
        if m in reached:
            continue
        reached.add(m)
        todo += [n for n in graph.get(m, ()) if n in files]
    assert not {m for m in reached if wing_of(m) in ("autograder.authoring", "autograder.audit")}


def test_test_files_have_unique_names():
    """tests/ mirrors the code in folders without __init__.py, so pytest imports each test file by its
    name alone: two test files of one name in different folders would shadow each other."""
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
