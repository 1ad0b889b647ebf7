"""Every rule a hidden check enforces is declared beside it and stated where the student works.

Three holds, each with a case showing it can fail:
- the rules a check's code enforces (the `under(R_...)` blocks of the check and of the module's
  functions it calls) are exactly its cell's `CellSpec.rules`;
- every rule of a cell is written, word for word, in each released solution cell that defines a
  function the cell grades (what `make labs` writes), and the notebook in labs/ is that build;
- a failing check says which rule it found broken, and only a rule of its own cell: run against
  the catalog's wrong solutions and against contract breakers, every failure is an AssertionError
  (or a timing failure) naming one of the cell's rules.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.authoring import labs
from autograder.checks import CellSpec, Rule, under

ROOT = Path(__file__).resolve().parents[3]
LABS = ["lab1", "lab2"]


def enforced_rules(module) -> dict[str, set[str]]:
    """check function name -> names of the rules its code enforces (under(R) in it and in the
    module-level functions it calls, transitively)."""
    tree = ast.parse(inspect.getsource(module))
    funcs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    direct, calls = {}, {}
    for name, node in funcs.items():
        direct[name], calls[name] = set(), set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                if sub.func.id == "under" and sub.args and isinstance(sub.args[0], ast.Name):
                    direct[name].add(sub.args[0].id)
                elif sub.func.id in funcs:
                    calls[name].add(sub.func.id)
    out = {}
    for name in funcs:
        seen, todo, rules = set(), [name], set()
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            rules |= direct[f]
            todo += calls[f]
        out[name] = rules
    return out


def rule_problems(module) -> list[str]:
    """Where a lab's declared rules and the rules its checks enforce differ."""
    by_object = {id(v): k for k, v in vars(module).items() if isinstance(v, Rule)}
    enforced = enforced_rules(module)
    problems = []
    for spec in module.CELLS:
        declared = {by_object.get(id(r), r.name) for r in spec.rules}
        used = enforced.get(spec.check.__name__, set())
        if not spec.rules:
            problems.append(f"{spec.grade_id}: no rules declared")
        if used - declared:
            problems.append(f"{spec.grade_id}: enforces {sorted(used - declared)} without declaring them")
        if declared - used:
            problems.append(f"{spec.grade_id}: declares {sorted(declared - used)} that its check never enforces")
    return problems


@pytest.mark.parametrize("lab", LABS)
def test_each_cell_declares_exactly_the_rules_its_check_enforces(lab):
    assert rule_problems(importlib.import_module(f"autograder.checks.{lab}")) == []


def test_an_undeclared_or_unused_rule_is_found(tmp_path, monkeypatch):
    """A synthetic checks module: one check enforces a rule its cell does not list, another lists one it
    never enforces."""
    (tmp_path / "fake_rules_lab.py").write_text(textwrap.dedent('''
        from autograder.checks import CellSpec, Rule, under
        R_A = Rule("a", "a holds")
        R_B = Rule("b", "b holds")
        def _helper(f):
            with under(R_B):
                assert f() == 2
        def check_one(f):
            with under(R_A):
                assert f() == 1
            _helper(f)
        def check_two(f):
            with under(R_A):
                assert f() == 1
        CELLS = [CellSpec("test_one", 1, 1, check_one, ("f",), rules=(R_A,)),
                 CellSpec("test_two", 1, 1, check_two, ("f",), rules=(R_A, R_B))]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = rule_problems(importlib.import_module("fake_rules_lab"))
    assert any("test_one: enforces ['R_B']" in p for p in problems), problems
    assert any("test_two: declares ['R_B']" in p for p in problems), problems


def released(lab: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "labs" / lab / f"{lab}.ipynb", as_version=4)


def unstated(nb: nbformat.NotebookNode, cells: list[CellSpec]) -> list[str]:
    """(grade id, rule) pairs not written in every solution cell defining a function the cell grades."""
    missing = []
    for spec in cells:
        homes = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
                 and set(labs.defined_functions(c.source)) & set(spec.args)]
        if not homes:
            missing.append(f"{spec.grade_id}: no solution cell defines {spec.args}")
        for cell in homes:
            flat = " ".join(line.lstrip("#").strip() for line in cell.source.splitlines())
            missing += [f"{spec.grade_id}: {rule.name!r} not in {cell.metadata['nbgrader']['grade_id']}"
                        for rule in spec.rules if rule.text not in flat]
    return missing


@pytest.mark.parametrize("lab", LABS)
def test_every_rule_is_written_in_the_released_cell_the_student_works_in(lab):
    module = importlib.import_module(f"autograder.checks.{lab}")
    assert unstated(released(lab), module.CELLS) == []


def test_a_rule_missing_from_the_released_notebook_is_found():
    from autograder.checks import lab1

    nb = released("lab1")
    for cell in nb.cells:  # the notebook as it would be had make labs not written Part 2's rules
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "impl_part2":
            cell.source = cell.source.replace("never touched", "left alone")
    assert any("'sampler rng' not in impl_part2" in m for m in unstated(nb, lab1.CELLS))


def test_the_rules_block_wraps_and_heads_the_solution_cell():
    rule = Rule("long", "word " * 60)
    spec = CellSpec("test_x", 1, 2, lambda f: None, ("f",), rules=(rule,))
    block = labs.rules_block([spec])
    assert block.startswith(labs.RULES_HEAD) and all(len(line) <= 100 for line in block.splitlines())
    assert "# test_x (Part 1, 2 points):" in block


# ------------------------------------------------------------------------------ failures name their rule
def failing_rule(spec: CellSpec, fns: dict) -> Rule | None:
    """The rule a check reports broken for these functions; None when it passes or the student's code
    crashed (not a rule's failure). Fails the test on an AssertionError that names no rule of the cell."""
    try:
        spec.check(*[fns[a] for a in spec.args])
    except AssertionError as err:
        rule = getattr(err, "rule", None)
        assert rule is not None, f"{spec.grade_id}: a failure that names no rule: {err}"
        assert rule in spec.rules, f"{spec.grade_id}: failed on {rule.name!r}, not one of its cell's rules"
        assert f"The rule: {rule.text}" in str(err)
        return rule
    except Exception:  # noqa: BLE001 - the wrong code crashed: nbgrader takes the points, no rule involved
        return None
    return None


def test_an_unruled_failure_is_refused():
    def check(f):
        assert f() == 1, "bare"

    spec = CellSpec("test_bare", 1, 1, check, ("f",), rules=(Rule("r", "r holds"),))
    with pytest.raises(AssertionError, match="names no rule"):
        failing_rule(spec, {"f": lambda: 2})


def test_under_names_the_rule_and_keeps_timing_failures_apart():
    from autograder.checks.timing import TimingFailure

    rule = Rule("r", "r holds")
    with pytest.raises(AssertionError) as err:
        with under(rule):
            raise AssertionError("expected 1, got 2")
    assert type(err.value) is AssertionError  # what nbgrader, the harness and the feedback know
    assert err.value.rule is rule and str(err.value) == "expected 1, got 2\nThe rule: r holds"
    with pytest.raises(AssertionError) as inner:  # the innermost rule is kept
        with under(Rule("outer", "outer holds")), under(rule):
            raise AssertionError("x")
    assert inner.value.rule is rule
    with pytest.raises(TimingFailure) as timed:
        with under(rule):
            raise TimingFailure("too slow")
    assert timed.value.rule is rule and "The rule: r holds" in str(timed.value)


def lab1_breakers() -> dict[str, dict]:
    """Contract breakers of Lab 1, each the reference with one function replaced."""
    from autograder.authoring import reference

    ref = reference.load("lab1")

    def global_rng_sampler(p, q, rng):
        return ref.speculative_sample(p, q, np.random.default_rng(np.random.randint(2**31)))

    def accepting_any_input(p, q, rng):
        return int(np.argmax(np.asarray(p, float)))

    def global_rng_batch(p, q, rng):
        return ref.speculative_sample_batch(p, q, np.random.default_rng(np.random.randint(2**31)))

    def block_without_checks(draft_tokens, p_rows, q_rows, rng):
        if len(draft_tokens) == 0:
            return [int(rng.integers(len(p_rows[0])))], 0
        return ref.verify_block(draft_tokens, p_rows, q_rows, rng)

    return {"global rng sampler": {"speculative_sample": global_rng_sampler},
            "sampler accepting any input": {"speculative_sample": accepting_any_input},
            "global rng batch": {"speculative_sample_batch": global_rng_batch},
            "block without k check": {"verify_block": block_without_checks},
            "alpha without checks": {"estimate_alpha": lambda n, k: float(np.sum(n)) / max(1, np.size(n))}}


@pytest.mark.slow
def test_lab1_failures_name_a_rule_of_their_cell():
    """Every deterministic and contract cell of Lab 1 against the catalog's mutants of its part and against
    contract breakers: each failure names a rule of that cell (the statistical cells are covered by
    `under` around the whole check, asserted by the declared-rules test above)."""
    from autograder.audit.mutants import lab1 as catalog
    from autograder.audit.mutants import namespace
    from autograder.authoring import reference
    from autograder.checks import lab1

    ref = vars(reference.load("lab1"))
    cheap = [s for s in lab1.CELLS if s.cases is None and s.grade_id != "test_batch_speed"]
    failed = set()
    for m in catalog.MUTANTS:
        ns = vars(namespace("lab1", m))
        for spec in cheap:
            if spec.part == m.part and failing_rule(spec, ns) is not None:
                failed.add((m.name, spec.grade_id))
    for name, replaced in lab1_breakers().items():
        fns = {**ref, **replaced}
        for spec in cheap:
            if set(replaced) & set(spec.args) and failing_rule(spec, fns) is not None:
                failed.add((name, spec.grade_id))
    # the test can see failures at all: each contract cell failed some breaker
    for gid in ("test_sampler_contracts", "test_block_contracts", "test_batch_contracts", "test_alpha_estimator"):
        assert any(g == gid for _, g in failed), (gid, sorted(failed))
