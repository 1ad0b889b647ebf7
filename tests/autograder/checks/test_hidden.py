"""The grading run's key (autograder/checks/hidden.py): without one the checks meet the instance written
in the check files; with one, seeds and token labels the sandbox cannot know, the same designs."""
from __future__ import annotations

import threading

import numpy as np

from autograder.checks import hidden
from autograder.checks.lab1_cases import (BIG, block_law, coupling_law, exact_law, fixed_pairs, pairs, sampler_cases,
                                          toy_bigram)

KEY = bytes(range(32))


def test_without_a_key_the_fixed_instance():
    assert not hidden.active()
    assert hidden.seed("test_sampler_exactness", 20261) == 20261
    for name, (p, q) in pairs().items():
        a, b = fixed_pairs()[name]
        assert np.array_equal(p, a) and np.array_equal(q, b), name
    assert toy_bigram().start == 0


def test_a_key_draws_seeds_apart_from_the_fixed_ones_and_from_other_keys():
    with hidden.keyed(KEY):
        assert hidden.active()
        first = [hidden.seed(label, 1) for label in ("a", "b", "c")]
        assert first == [hidden.seed(label, 1) for label in ("a", "b", "c")]  # one key, one instance
    with hidden.keyed(hidden.student_key(KEY, "other student")):
        other = [hidden.seed(label, 1) for label in ("a", "b", "c")]
    assert len(set(first)) == 3 and 1 not in first and not set(first) & set(other)
    assert hidden.student_key(KEY, "a") != hidden.student_key(KEY, "b")
    assert not hidden.active()  # the key ends with its block


def test_a_key_relabels_every_pair_and_keeps_each_design():
    relabelled = 0
    with hidden.keyed(KEY):
        for name, (p, q) in pairs().items():
            a, b = fixed_pairs()[name]
            perm = hidden.relabelling(f"pair {name}", len(a))
            assert np.array_equal(p, a[perm]) and np.array_equal(q, b[perm]), name
            relabelled += not np.array_equal(perm, np.arange(len(a)))
            # the exact laws follow the tokens: relabelling the law is the law of the relabelled pair
            assert np.allclose(exact_law(p, q), exact_law(a, b)[perm])
            v = len(a)
            joint = coupling_law(a, b).reshape(v, v)
            assert np.allclose(coupling_law(p, q).reshape(v, v), joint[np.ix_(perm, perm)])
        cases = sampler_cases()
        model = toy_bigram()
    assert relabelled >= 6  # 8 pairs, of 3 to 1000 tokens: a permutation is the identity with probability <= 1/6
    fixed = sampler_cases()
    assert [c.n for c in cases] == [c.n for c in fixed]  # the same sizes (hence eps and bounds)
    # the law cases stay on the pairs as written (designs sized against order-dependent mistakes); the coupling
    # cases, which a sampler keyed to the written pairs must also pass, and both 32,000-token cases (whose
    # low-ranked tokens a sampler must not know) are relabelled
    for keyed, plain in zip(cases, fixed):
        relabelled = keyed.name.startswith("coupling of") or BIG in keyed.name
        assert np.array_equal(keyed.law, plain.law) != relabelled, keyed.name
    assert np.array_equal(model.target, toy_bigram().target) and np.array_equal(block_law(model, 1),
                                                                                 block_law(toy_bigram(), 1))


def test_a_thread_starts_without_the_key():
    seen = []
    with hidden.keyed(KEY):
        t = threading.Thread(target=lambda: seen.append(hidden.active()))
        t.start()
        t.join()
    assert seen == [False]
