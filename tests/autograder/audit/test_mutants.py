"""autograder.mutants: every mutant is a reference function plus edits that each apply exactly once.

Notation: p = target, q = draft.
"""
from __future__ import annotations

import ast

import numpy as np
import pytest

from autograder import reference
from autograder.mutants import EditError, Mutant, apply_edits, catalog, namespace
from autograder.mutants.lab1 import MUTANTS as LAB1
from autograder.mutants.lab2 import MUTANTS as LAB2

ALL = LAB1 + LAB2


@pytest.mark.parametrize("m", ALL, ids=[f"{m.lab}-{m.name}" for m in ALL])
def test_every_edit_applies_once_and_the_result_differs_from_the_reference(m):
    original = reference.function_source(m.lab, m.replaces)
    source = original
    for old, new in m.edits:  # replayed here, independently of apply_edits
        assert source.count(old) == 1, f"{m.name}: {old!r} occurs {source.count(old)} times"
        source = source.replace(old, new)
    assert m.source == source
    tree = ast.parse(source)
    assert [type(node).__name__ for node in tree.body] == ["FunctionDef"] and tree.body[0].name == m.replaces
    assert ast.dump(tree) != ast.dump(ast.parse(original)), f"{m.name} is the reference"


def test_catalogs_are_bound_to_their_lab_with_unique_names():
    for lab, mutants in (("lab1", LAB1), ("lab2", LAB2)):
        assert {m.lab for m in mutants} == {lab}
        assert len({m.name for m in mutants}) == len(mutants)
        assert all(m.doc and "\n" not in m.doc for m in mutants)


def _mutant(*edits, replaces="acceptance_prob") -> Mutant:
    (m,) = catalog("lab1", [Mutant("under_test", 1, replaces, "An edit under test.", edits)])
    return m


def test_an_edit_that_does_not_match_names_the_mutant_and_the_edit():
    m = _mutant(("min(1.0, p[x] / q[x])", "min(1.0, q[x] / p[x])"), ("p[x] / q[y]", "0.5"))
    with pytest.raises(EditError, match=r"mutant under_test of lab1's acceptance_prob: edit 2 of 2 expects "
                                         r"'p\[x\] / q\[y\]' exactly once .* found it 0 times"):
        m.source


def test_an_edit_that_matches_twice_is_an_error():
    # acceptance_prob checks p and q with two calls of check_distribution
    with pytest.raises(EditError, match="found it 2 times"):
        _mutant(("check_distribution(", "np.asarray(")).source


def test_a_change_of_the_reference_under_an_edit_is_caught():
    (m,) = [m for m in LAB1 if m.name == "accept_ratio_inverted"]
    changed = reference.function_source("lab1", "acceptance_prob").replace("p[x] / q[x]", "p[x] * (1 / q[x])")
    with pytest.raises(EditError, match="found it 0 times"):
        apply_edits(changed, m.edits, m.name)


@pytest.mark.parametrize("edit", [("p[x] / q[x]", "p[x] / q[x]"),
                                  ("    q = check_distribution", "    # the draft\n    q = check_distribution")],
                         ids=["no change", "a comment only"])
def test_an_edit_that_leaves_the_reference_as_it_was_is_an_error(edit):
    with pytest.raises(EditError, match="changes nothing|only comments"):
        _mutant(edit).source


def test_a_catalog_without_edits_or_with_a_repeated_name_is_refused():
    with pytest.raises(ValueError, match="no edit"):
        catalog("lab1", [Mutant("none", 1, "acceptance_prob", "Nothing.", [])])
    twice = Mutant("same", 1, "acceptance_prob", "Twice.", [("min(1.0, ", "max(1.0, ")])
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
