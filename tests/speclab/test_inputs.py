"""speclab.inputs: the one set of input checks that GPT (every forward) and speclab.hf's wrapper run.

Each check is given one valid input and one wrong input per rule, with the expected error written
out; the small-input path (read to the host) and the large one (device reductions) must agree.
Deterministic.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from speclab.inputs import HOST_READ_MAX, check_cache_batch, check_cache_room, check_positions, check_rollback, check_tokens
from speclab.model import GPT, GPTConfig

CPU = torch.device("cpu")
LONG = torch.long


def test_check_tokens_accepts_valid_ids():
    check_tokens(torch.tensor([[0, 5, 9]]), CPU, 10)
    check_tokens(torch.full((2, HOST_READ_MAX), 9), CPU, 10)  # the device-reduction path


@pytest.mark.parametrize("tokens, error, message", [
    ([[1, 2]], TypeError, "tokens must be a torch.Tensor, got list"),
    (torch.zeros(3, dtype=LONG), ValueError, r"tokens must have shape \[B, T\], got shape \(3,\)"),
    (torch.zeros(1, 2, 1, dtype=LONG), ValueError, r"tokens must have shape \[B, T\], got shape \(1, 2, 1\)"),
    (torch.zeros(1, 2, dtype=torch.int32), ValueError, r"tokens must be torch.long \(int64\), got torch.int32"),
    (torch.zeros(1, 0, dtype=LONG), ValueError, r"tokens must hold at least one token, got shape \(1, 0\)"),
    (torch.zeros(0, 3, dtype=LONG), ValueError, "at least one token"),
    (torch.tensor([[3, 10]]), ValueError, r"token ids must lie in \[0, 10\), got values in \[3, 10\]"),
    (torch.tensor([[-2, 4]]), ValueError, r"token ids must lie in \[0, 10\), got values in \[-2, 4\]"),
])
def test_check_tokens_refuses_each_wrong_input(tokens, error, message):
    with pytest.raises(error, match=message):
        check_tokens(tokens, CPU, 10)


@pytest.mark.parametrize("n", [1, HOST_READ_MAX, HOST_READ_MAX + 1, 1000])
def test_both_paths_find_one_bad_id_at_the_end(n):
    tokens = torch.zeros(1, n, dtype=LONG)
    tokens[0, -1] = 10
    with pytest.raises(ValueError, match=r"got values in \[0, 10\]" if n > 1 else r"\[10, 10\]"):
        check_tokens(tokens, CPU, 10)


def test_check_tokens_without_a_vocabulary_reads_no_ids():
    # the static path: ids are the caller's promise (reading them would synchronise a GPU)
    check_tokens(torch.tensor([[10_000, -1]]), CPU)
    with pytest.raises(ValueError, match="torch.long"):
        check_tokens(torch.zeros(1, 1), CPU)  # the metadata is still checked


def test_check_tokens_refuses_another_device():
    with pytest.raises(ValueError, match="device mismatch: tokens are on meta, the model is on cpu"):
        check_tokens(torch.zeros(1, 1, dtype=LONG, device="meta"), CPU, 10)


@pytest.mark.parametrize("start, T", [(0, 1), (7, 3), (5, HOST_READ_MAX + 4)])
def test_check_positions_accepts_a_continuing_run(start, T):
    check_positions(torch.arange(start, start + T), start, T)
    check_positions(torch.arange(start, start + T, dtype=torch.int32), start, T)


@pytest.mark.parametrize("positions, message", [
    (torch.tensor([7, 8, 10]), r"expected 7..9, got \[7, 8, 10\]"),
    (torch.tensor([6, 7, 8]), r"expected 7..9, got \[6, 7, 8\]"),
    (torch.tensor([7.0, 8.0, 9.0]), "must continue the valid cache length"),
    (torch.tensor([True, True, True]), "must continue the valid cache length"),
    (torch.arange(7, 9), r"1-D tensor of length T=3, got \(2,\)"),
    (torch.arange(7, 10)[None], r"1-D tensor of length T=3, got \(1, 3\)"),
    ([7, 8, 9], "1-D tensor of length T=3, got list"),
])
def test_check_positions_refuses_each_wrong_run(positions, message):
    with pytest.raises(ValueError, match=message):
        check_positions(positions, 7, 3)


def test_check_positions_long_runs_are_compared_on_the_device_too():
    T = HOST_READ_MAX + 10
    shifted = torch.arange(1, T + 1)
    with pytest.raises(ValueError, match=f"expected 0..{T - 1}"):
        check_positions(shifted, 0, T)


def test_cache_batch_and_room():
    cache = SimpleNamespace(batch=2, length=6, capacity=8)
    check_cache_batch(cache, 2)
    check_cache_room(cache, 2)  # 6 + 2 = 8 slots: exactly full
    with pytest.raises(ValueError, match="batch mismatch: tokens have batch 1, the cache was built for batch 2"):
        check_cache_batch(cache, 1)
    with pytest.raises(ValueError, match="cache capacity exceeded: 6 valid . 3 new tokens > capacity 8"):
        check_cache_room(cache, 3)


@pytest.mark.parametrize("n, error, message", [
    (-1, ValueError, r"cannot roll back to length -1: it must lie in \[0, 4\]"),
    (5, ValueError, r"cannot roll back to length 5"),
    (True, TypeError, "rollback length must be an int, got bool"),
    (2.0, TypeError, "rollback length must be an int, got float"),
    (torch.tensor(2), TypeError, "got Tensor"),
])
def test_check_rollback(n, error, message):
    for ok in (0, 2, 4):
        check_rollback(ok, 4)
    with pytest.raises(error, match=message):
        check_rollback(n, 4)


def test_check_rollback_names_what_the_caller_accepts():
    with pytest.raises(TypeError, match="must be an int or a 0-d device tensor, got str"):
        check_rollback("3", 4, "an int or a 0-d device tensor")


@pytest.mark.parametrize("bad", [
    [[1]], torch.zeros(3, dtype=LONG), torch.zeros(1, 2), torch.zeros(1, 0, dtype=LONG), torch.full((1, 2), 256),
])
def test_every_forward_of_gpt_raises_what_the_shared_check_raises(bad):
    """One set of checks: the cached, cache-free and reference forwards give the very error of check_tokens."""
    model = GPT(GPTConfig.preset("tiny")).eval()
    with pytest.raises(Exception) as want:
        check_tokens(bad, model.device, model.cfg.vocab_size)
    for forward in (model, model.reference_forward, lambda t: model(t, None, model.new_cache())):
        with pytest.raises(type(want.value)) as got:
            forward(bad)
        assert str(got.value) == str(want.value)
