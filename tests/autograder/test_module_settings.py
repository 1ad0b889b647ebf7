"""No module of the course sets another module's attribute: settings travel as arguments (the grader's
`Config`, a lab's `CellSpec`), never by assigning to, or `setattr` on, a module the code imported
(`clock.STRETCH = 0.0`, `policy.run = timed`, `sys.stdout = ...` were the cases this test was written for).

An AST scan of speclab/, autograder/, book/_ext/ and benchmarks/: a name bound by `import M` or
`from P import M` where M is a module, then an assignment to `M.attr` or `setattr(M, ...)`.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = ("speclab", "autograder", "book/_ext", "benchmarks")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def module_names(tree: ast.AST, package: str) -> set[str]:
    """The names a module binds to other modules."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.update(a.asname or a.name for a in node.names if _is_module(f"{base}.{a.name}"))
    return names


def settings_from_outside(source: str, package: str) -> list[str]:
    """`line: target` of each assignment to (or setattr on) an attribute of an imported module."""
    tree = ast.parse(source)
    modules = module_names(tree, package)
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in modules:
            found.append(f"{node.lineno}: setattr({node.args[0].id}, ...)")
        for t in targets:
            for target in (t.elts if isinstance(t, ast.Tuple) else [t]):
                # `M.a = ...` or `M.a.b = ...`; an item of a module's object (`os.environ[k] = v`) is not one
                chain = target
                while isinstance(chain, ast.Attribute) and isinstance(chain.value, ast.Attribute):
                    chain = chain.value
                if isinstance(chain, ast.Attribute) and isinstance(chain.value, ast.Name) and chain.value.id in modules:
                    found.append(f"{node.lineno}: {chain.value.id}.{chain.attr}")
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def test_no_module_sets_another_module_s_attribute():
    bad = []
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            package = ".".join(rel.parts[:-1])
            bad += [f"{rel}:{hit}" for hit in settings_from_outside(path.read_text(), package)]
    assert not bad, "assignments to another module's attribute (pass the setting as an argument):\n" + "\n".join(bad)


def test_the_scan_sees_each_way_of_setting_a_module_from_outside():
    source = ("import sys\nimport torch.backends\nfrom autograder.inside import clock\nfrom os import path\n"
              "clock.STRETCH = 0.0\nsys.stdout = None\nsetattr(clock, 'LOOK_S', 2)\npath.sep += '/'\n"
              "torch.backends.cudnn.allow_tf32 = True\n"
              "import os\nos.environ['X'] = '1'\nsys.path[:] = []\na, sys.argv = 1, []\n"
              "class K:\n    def f(self):\n        self.x = 1\n        obj = K()\n        obj.y = 2\n")
    assert settings_from_outside(source, "autograder.pipeline") == [
        "5: clock.STRETCH", "6: sys.stdout", "7: setattr(clock, ...)", "8: path.sep", "9: torch.backends", "13: sys.argv"]
