"""autograder.audit.mutants: every mutant is a reference function plus diff-like hunks that each apply exactly once.

Notation: p = target, q = draft.
"""
from __future__ import annotations

import ast

import numpy as np
import pytest

from autograder.authoring import reference
from autograder.audit.mutants import EditError, Mutant, apply_edits, catalog, hunks, namespace
from autograder.audit.mutants.lab1 import MUTANTS as LAB1
from autograder.audit.mutants.lab2 import MUTANTS as LAB2

ALL = LAB1 + LAB2


@pytest.mark.parametrize("m", ALL, ids=[f"{m.lab}-{m.name}" for m in ALL])
def test_every_hunk_applies_once_and_the_result_differs_from_the_reference(m):
    original = reference.function_source(m.lab, m.replaces)
    source = original
    for old, new in hunks(m.edits):  # replayed here as text, independently of apply_edits
        old_text, new_text = "\n".join(old), "\n".join(new)
        assert source.count(old_text) == 1, f"{m.name}: {old_text!r} occurs {source.count(old_text)} times"
        source = source.replace(old_text, new_text) if new else source.replace(old_text + "\n", "")
    assert m.source == source
    tree = ast.parse(source)
    assert [type(node).__name__ for node in tree.body] == ["FunctionDef"] and tree.body[0].name == m.replaces
    assert ast.dump(tree) != ast.dump(ast.parse(original)), f"{m.name} is the reference"


def test_catalogs_are_bound_to_their_lab_with_unique_names():
    for lab, mutants in (("lab1", LAB1), ("lab2", LAB2)):
        assert {m.lab for m in mutants} == {lab}
        assert len({m.name for m in mutants}) == len(mutants)
        assert all(m.doc and "\n" not in m.doc for m in mutants)


def test_hunks_read_like_a_diff():
    edits = """
-a
-b
+c

-d
-e
+f
+g
-h
"""
    assert hunks(edits) == [(["a", "b"], ["c"]), (["d", "e"], ["f", "g"]), (["h"], [])]
    with pytest.raises(EditError, match="starts with - or +"):
        hunks(" a\n")
    with pytest.raises(EditError, match="without a - line"):
        hunks("+a\n")


def test_a_hunk_replaces_whole_lines_and_deletes_with_no_plus_line():
    source = "def f(x):\n    y = x\n    z = y\n    return z"
    assert apply_edits(source, "-    z = y\n", "f") == "def f(x):\n    y = x\n    return z"
    with pytest.raises(EditError, match="found them 0 times"):  # part of a line is not a line
        apply_edits(source, "-z = y\n+z = 2 * y\n", "f")


def _mutant(edits: str, replaces: str = "acceptance_prob") -> Mutant:
    (m,) = catalog("lab1", [Mutant("under_test", 1, replaces, "An edit under test.", edits)])
    return m


def test_a_hunk_that_does_not_match_names_the_mutant_the_hunk_and_its_lines():
    m = _mutant("""
-    return float(min(1.0, p[x] / q[x]))
+    return float(min(1.0, q[x] / p[x]))

-    if q[y] == 0:
+    if q[x] <= 0:
""")
    with pytest.raises(EditError, match=r"(?s)mutant under_test of lab1's acceptance_prob: hunk 2 of 2 expects its "
                                        r"lines exactly once .* found them 0 times .*\n-    if q\[y\] == 0:"):
        m.source


def test_a_hunk_that_matches_twice_is_an_error():
    source = "def f():\n    x = 1\n    x = 1\n    return x"
    with pytest.raises(EditError, match="found them 2 times"):
        apply_edits(source, "-    x = 1\n+    x = 2\n", "f")


def test_a_change_of_the_reference_under_a_hunk_is_caught():
    (m,) = [m for m in LAB1 if m.name == "accept_ratio_inverted"]
    changed = reference.function_source("lab1", "acceptance_prob").replace("p[x] / q[x]", "p[x] * (1 / q[x])")
    with pytest.raises(EditError, match="found them 0 times"):
        apply_edits(changed, m.edits, m.name)


@pytest.mark.parametrize("edits", ["-    p = check_distribution(p, \"p\")\n+    p = check_distribution(p, \"p\")\n",
                                   "-    p = check_distribution(p, \"p\")\n+    p = check_distribution(p, \"p\")  # p\n"],
                         ids=["no change", "a comment only"])
def test_an_edit_that_leaves_the_reference_as_it_was_is_an_error(edits):
    with pytest.raises(EditError, match="changes nothing|only comments"):
        _mutant(edits).source


def test_a_catalog_without_edits_or_with_a_repeated_name_is_refused():
    with pytest.raises(ValueError, match="no edit"):
        catalog("lab1", [Mutant("none", 1, "acceptance_prob", "Nothing.", "")])
    twice = Mutant("same", 1, "acceptance_prob", "Twice.", "-    q = check_distribution(q, \"q\", size=p.size)\n")
    with pytest.raises(ValueError, match="repeat"):
        catalog("lab1", [twice, twice])


def test_edited_functions_do_what_their_doc_says():
    """Hand-worked values for a few mutants: the edit is the bug the doc names."""
    by_name = {m.name: m for m in LAB1}
    p, q = np.array([0.1, 0.9]), np.array([0.9, 0.1])
    assert namespace("lab1").acceptance_prob(p, q, 0) == pytest.approx(1 / 9)
    assert namespace("lab1", by_name["accept_ratio_inverted"]).acceptance_prob(p, q, 0) == 1.0
    assert namespace("lab1", by_name["accept_not_clipped"]).acceptance_prob(p, q, 1) == pytest.approx(9.0)
    same = np.array([0.2, 0.3, 0.5])
    with pytest.raises(ValueError):
        namespace("lab1").residual_distribution(same, same)
    assert np.isnan(namespace("lab1", by_name["residual_silent_nan_when_equal"]).residual_distribution(same, same)).all()
    negative = np.array([-0.1, 0.6, 0.5])
    assert namespace("lab1", by_name["no_input_validation"]).check_distribution(negative, "p").tolist() == [-0.1, 0.6, 0.5]
    # all drafts accepted (p == q rows), so the bonus must come from row k = 1, one-hot at token 2
    rows_p, rows_q = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]), np.array([[0.5, 0.5, 0.0]])
    rng = np.random.default_rng(0)
    assert namespace("lab1").verify_block([0], rows_p, rows_q, rng) == ([0, 2], 1)
    assert namespace("lab1", by_name["block_no_bonus"]).verify_block([0], rows_p, rows_q, rng) == ([0], 0)
