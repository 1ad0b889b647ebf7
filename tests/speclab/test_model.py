"""The tiny GPT and its KV cache: cached decoding equals the cache-free reference, rollback is exact
and O(1), stale slots are never read, and bad input raises a clear error.

Models here have random weights drawn with a large spread so that attention is sharp and any
mistake in masking or positions shows up far above the tolerance.
"""

from __future__ import annotations

import math

import pytest
import torch

from speclab.model import GPT, GPTConfig, KVCache, PRESETS, apply_rope, rope_tables

ATOL = 1e-4  # fp32, logits of order 10: about 1e-5 relative; a masking or position bug moves logits by O(1)


def make_model(preset: str = "tiny", seed: int = 0, dtype: torch.dtype = torch.float32) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig.preset(preset)).to(dtype).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.5 / math.sqrt(param.shape[-1]) * 4)
    return model


def random_tokens(B: int, T: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (B, T), generator=g)


def run_chunks(model: GPT, tokens: torch.Tensor, chunks: list[int], cache: KVCache) -> torch.Tensor:
    """Feed tokens through the cache in consecutive chunks; return the concatenated logits."""
    outs, start = [], cache.length
    for size in chunks:
        piece = tokens[:, start : start + size]
        outs.append(model(piece, torch.arange(start, start + size), cache))
        start += size
    return torch.cat(outs, dim=1)


# -- hand-worked pieces ------------------------------------------------------------------


def test_rope_hand_values():
    # hs = 2: a single frequency 1/base^0 = 1, so position t rotates by t radians.
    cos, sin = rope_tables(max_len=3, head_dim=2, base=10000.0)
    x = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2).expand(1, 1, 3, 2)  # same vector at positions 0, 1, 2
    out = apply_rope(x, cos, sin)[0, 0]
    expected = torch.tensor([[1.0, 0.0], [math.cos(1.0), math.sin(1.0)], [math.cos(2.0), math.sin(2.0)]])
    torch.testing.assert_close(out, expected)


def test_rope_preserves_dot_products_of_equal_shifts():
    # <R(a)x, R(b)y> depends only on a - b: the property that makes rotary embeddings relative.
    cos, sin = rope_tables(max_len=16, head_dim=8, base=10000.0)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, generator=g), torch.randn(8, generator=g)
    def rot(v, t):
        return apply_rope(v.view(1, 1, 1, 8), cos[t : t + 1], sin[t : t + 1]).view(8)
    assert torch.dot(rot(x, 5), rot(y, 2)).item() == pytest.approx(torch.dot(rot(x, 13), rot(y, 10)).item(), abs=1e-5)


def test_presets_share_the_byte_vocabulary():
    assert PRESETS["target"].vocab_size == PRESETS["draft"].vocab_size == 256
    assert GPTConfig.preset("target") is PRESETS["target"]
    with pytest.raises(ValueError, match="unknown preset"):
        GPTConfig.preset("huge")


@pytest.mark.parametrize(
    "kwargs, message",
    [({"d_model": 30, "n_head": 4}, "divisible"), ({"n_layer": 0}, "n_layer"), ({"d_model": 12, "n_head": 4}, "even")],
)
def test_bad_config_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**kwargs)


# -- cached decoding equals the reference ------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_token_at_a_time_matches_reference_at_every_position(seed):
    model = make_model(seed=seed)
    tokens = random_tokens(2, 40, seed)
    ref = model.reference_forward(tokens)  # [2, 40, 256]
    cache = model.new_cache(batch=2, max_len=64)
    got = run_chunks(model, tokens, [1] * 40, cache)
    assert cache.length == 40
    torch.testing.assert_close(got, ref, atol=ATOL, rtol=0)


@pytest.mark.parametrize("chunks", [[40], [7, 1, 1, 5, 26], [1, 9, 30], [13, 13, 13, 1]])
def test_chunked_prefill_and_verify_match_reference(chunks):
    model = make_model(seed=3)
    tokens = random_tokens(3, sum(chunks), 7)
    ref = model.reference_forward(tokens)
    got = run_chunks(model, tokens, chunks, model.new_cache(batch=3, max_len=64))
    torch.testing.assert_close(got, ref, atol=ATOL, rtol=0)


def test_cacheless_forward_matches_reference():
    model = make_model(seed=4)
    tokens = random_tokens(2, 50, 4)
    torch.testing.assert_close(model(tokens), model.reference_forward(tokens), atol=ATOL, rtol=0)
    torch.testing.assert_close(model(tokens, torch.arange(50), None), model.reference_forward(tokens), atol=ATOL, rtol=0)


def test_target_preset_cached_matches_reference():
    model = make_model("target", seed=5)
    tokens = random_tokens(1, 24, 5)
    ref = model.reference_forward(tokens)
    got = run_chunks(model, tokens, [10, 1, 1, 4, 8], model.new_cache(batch=1, max_len=32))
    torch.testing.assert_close(got, ref, atol=ATOL, rtol=0)


def test_reference_differs_when_a_past_token_changes():
    # guards the tests above against a model whose outputs ignore the context
    model = make_model(seed=6)
    a = random_tokens(1, 20, 6)
    b = a.clone()
    b[0, 3] = (b[0, 3] + 1) % 256
    la, lb = model.reference_forward(a), model.reference_forward(b)
    torch.testing.assert_close(la[:, :3], lb[:, :3], atol=0, rtol=0)
    assert (la[:, -1] - lb[:, -1]).abs().max() > 1e-2


# -- rollback ----------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [0, 1, 9, 17, 30])
def test_rollback_then_new_tokens_equals_fresh_prefill(keep):
    model = make_model(seed=8)
    old = random_tokens(2, 30, 8)
    cache = model.new_cache(batch=2, max_len=64)
    run_chunks(model, old, [12, 1, 17], cache)
    cache.rollback(keep)
    assert cache.length == keep
    new_tail = random_tokens(2, 14, 9)
    new = torch.cat([old[:, :keep], new_tail], dim=1)
    got = run_chunks(model, new, [5, 1, 8], cache)  # decode different tokens from position keep on
    fresh = model.new_cache(batch=2, max_len=64)
    want = model(new, torch.arange(new.shape[1]), fresh)[:, keep:]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(got, model.reference_forward(new)[:, keep:], atol=ATOL, rtol=0)


def test_rollback_is_o1_nothing_copied_or_reallocated():
    model = make_model(seed=10)
    cache = model.new_cache(batch=1, max_len=64)
    run_chunks(model, random_tokens(1, 30, 10), [30], cache)
    pointers = [t.data_ptr() for t in cache.k + cache.v]
    snapshot = [t.clone() for t in cache.k + cache.v]
    cache.rollback(11)
    assert [t.data_ptr() for t in cache.k + cache.v] == pointers
    for before, after in zip(snapshot, cache.k + cache.v):
        assert torch.equal(before, after)  # rollback wrote nothing; stale slots stay but are unreadable


@pytest.mark.parametrize("keep, chunks", [(0, [6]), (5, [1, 1, 1]), (20, [4, 1]), (29, [1])])
def test_stale_slots_poisoned_with_nan_are_never_read(keep, chunks):
    model = make_model(seed=11)
    tokens = random_tokens(1, 30, 11)
    new_tail = random_tokens(1, sum(chunks), 12)

    def continue_after_rollback(poison: bool) -> torch.Tensor:
        cache = model.new_cache(batch=1, max_len=48)
        run_chunks(model, tokens, [30], cache)
        cache.rollback(keep)
        if poison:
            for buf in cache.k + cache.v:
                buf[:, :, keep:] = float("nan")  # every slot past the valid length, up to capacity
        seq = torch.cat([tokens[:, :keep], new_tail], dim=1)
        return run_chunks(model, seq, chunks, cache)

    clean, poisoned = continue_after_rollback(False), continue_after_rollback(True)
    assert torch.isfinite(poisoned).all()
    torch.testing.assert_close(poisoned, clean, atol=0, rtol=0)


def test_poison_detector_catches_a_read_of_a_stale_slot():
    # the poison test can fail: a NaN inside the valid region does reach the output
    model = make_model(seed=13)
    cache = model.new_cache(batch=1, max_len=16)
    run_chunks(model, random_tokens(1, 8, 13), [8], cache)
    cache.k[0][:, :, 7] = float("nan")
    out = model(random_tokens(1, 1, 14), torch.tensor([8]), cache)
    assert torch.isnan(out).all()


# -- errors ------------------------------------------------------------------------------


def test_writing_past_capacity_raises():
    model = make_model()
    cache = model.new_cache(batch=1, max_len=8)
    model(random_tokens(1, 6, 0), torch.arange(6), cache)
    with pytest.raises(ValueError, match="capacity"):
        model(random_tokens(1, 3, 1), torch.arange(6, 9), cache)
    assert cache.length == 6  # a rejected call leaves the cache alone


@pytest.mark.parametrize("positions", [torch.arange(0, 2), torch.arange(5, 7), torch.tensor([4, 3]), torch.arange(4, 7)])
def test_positions_must_continue_the_valid_length(positions):
    model = make_model()
    cache = model.new_cache(batch=1, max_len=16)
    model(random_tokens(1, 4, 0), torch.arange(4), cache)
    with pytest.raises(ValueError, match="positions"):
        model(random_tokens(1, 2, 1), positions, cache)
    assert cache.length == 4


def test_batch_mismatch_raises():
    model = make_model()
    cache = model.new_cache(batch=2, max_len=16)
    with pytest.raises(ValueError, match="batch mismatch"):
        model(random_tokens(1, 3, 0), torch.arange(3), cache)


def test_dtype_mismatch_raises():
    model = make_model()
    cache = model.new_cache(batch=1, max_len=16, dtype=torch.float64)
    with pytest.raises(ValueError, match="dtype mismatch"):
        model(random_tokens(1, 3, 0), torch.arange(3), cache)


def test_device_mismatch_raises():
    model = make_model()
    cache = model.new_cache(batch=1, max_len=16, device="meta")
    with pytest.raises(ValueError, match="device mismatch"):
        model(random_tokens(1, 3, 0), torch.arange(3), cache)
    with pytest.raises(ValueError, match="device mismatch"):
        model(random_tokens(1, 3, 0).to("meta"), torch.arange(3), None)


@pytest.mark.parametrize("n", [-1, 5])
def test_rollback_outside_valid_range_raises(n):
    model = make_model()
    cache = model.new_cache(batch=1, max_len=16)
    model(random_tokens(1, 4, 0), torch.arange(4), cache)
    with pytest.raises(ValueError, match="roll back"):
        cache.rollback(n)
    assert cache.length == 4


@pytest.mark.parametrize(
    "tokens, message",
    [
        (torch.tensor([[1, 2, 256]]), "token ids"),
        (torch.tensor([[1, -1]]), "token ids"),
        (torch.tensor([1, 2, 3]), r"shape \[B, T\]"),
        (torch.tensor([[1.0, 2.0]]), "torch.long"),
    ],
)
def test_bad_tokens_raise(tokens, message):
    with pytest.raises(ValueError, match=message):
        make_model()(tokens)


def test_cache_longer_than_model_context_raises():
    model = make_model()
    with pytest.raises(ValueError, match="max_len"):
        model.new_cache(batch=1, max_len=model.cfg.max_len + 1)


def test_logits_shape_and_dtype():
    model = make_model()
    out = model(random_tokens(3, 5, 0), torch.arange(5), model.new_cache(batch=3, max_len=8))
    assert out.shape == (3, 5, 256) and out.dtype == torch.float32
