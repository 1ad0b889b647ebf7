"""Models a check hands to a student's function travel as references (autograder/checks/models.py):
the grader notes what a declared factory returns, the student's side rebuilds only declared factories."""
from __future__ import annotations

import pytest

from autograder.checks import models
from autograder.inside.wire import encode


def test_a_declared_factory_s_objects_travel_as_references_and_are_rebuilt():
    from autograder.checks.lab2_sampling import toy_pair

    refs = models.record()
    target, draft = toy_pair(0)
    sent = encode([draft, 3], refs)
    assert sent[0] == {"__ref__": ["autograder.checks.lab2_sampling", "toy_pair", [0], 1]}
    assert sent[1] == 3
    again = models.rebuild(sent[0]["__ref__"])
    assert type(again) is type(draft)
    assert all((a == b).all() for a, b in zip(again.state_dict().values(), draft.state_dict().values()))


@pytest.mark.parametrize("ref", [
    ["os", "system", ["true"], 0],  # outside the course's checks
    ["autograder.checks.lab2", "check_speedup", [], 0],  # a check, not a declared factory
    ["autograder.checks.lab2_sampling", "toy_pair", [[1]], 0],  # arguments other than ints and strings
    ["autograder.checks.lab2_sampling", "no_such_function", [0], 0],
])
def test_only_declared_factories_are_rebuilt(ref):
    with pytest.raises(models.UnknownReference):
        models.rebuild(ref)
