"""speclab.kvcache: the two caches share one set of buffers (KVBuffers) and one model-fit check;
KVCache and HFCache share the host-length bookkeeping (HostLength).

Hand-built caches with the expected shapes and lengths written out; deterministic.
"""

from __future__ import annotations

import pytest
import torch

from speclab.kvcache import HostLength, KVBuffers, KVCache, StaticKVCache
from speclab.model import GPT, GPTConfig

KINDS = [KVCache, StaticKVCache]
CFG = GPTConfig(n_layer=3, n_head=2, d_model=16, max_len=32)  # hs = 8


@pytest.mark.parametrize("kind", KINDS)
def test_buffers_are_allocated_once_with_the_documented_shape(kind):
    cache = kind(3, 2, 4, 10, 8, "cpu", torch.float64)  # layers, B, nh, capacity, hs
    assert isinstance(cache, KVBuffers)
    assert len(cache.k) == len(cache.v) == 3
    assert all(t.shape == (2, 4, 10, 8) and t.dtype == torch.float64 and not t.any() for t in cache.k + cache.v)
    assert (cache.n_layer, cache.batch, cache.capacity) == (3, 2, 10)
    assert cache.dtype == torch.float64 and cache.device == torch.device("cpu")
    assert cache.length == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("batch, capacity", [(0, 4), (1, 0)])
def test_empty_buffers_are_refused(kind, batch, capacity):
    with pytest.raises(ValueError, match="batch and capacity must be >= 1"):
        kind(1, batch, 1, capacity, 2, "cpu", torch.float32)


@pytest.mark.parametrize("kind, method", [(KVCache, "new_cache"), (StaticKVCache, "new_static_cache")])
def test_check_fits_names_what_differs_and_how_to_build_the_right_cache(kind, method):
    cache = kind(3, 1, 2, 8, 8, "cpu", torch.float32)
    cache.check_fits(CFG, 1, torch.float32, torch.device("cpu"))  # fits: no error
    other = GPTConfig(n_layer=2, n_head=2, d_model=16, max_len=32)
    with pytest.raises(ValueError, match=rf"different model shape .*use model\.{method}\(\)"):
        cache.check_fits(other, 1, torch.float32, torch.device("cpu"))
    with pytest.raises(ValueError, match="batch mismatch: tokens have batch 2, the cache was built for batch 1"):
        cache.check_fits(CFG, 2, torch.float32, torch.device("cpu"))
    with pytest.raises(ValueError, match="dtype mismatch: the cache holds torch.float32, the model runs in torch.bfloat16"):
        cache.check_fits(CFG, 1, torch.bfloat16, torch.device("cpu"))
    with pytest.raises(ValueError, match="device mismatch"):
        cache.check_fits(CFG, 1, torch.float32, torch.device("meta"))


@pytest.mark.parametrize("kind", KINDS)
def test_both_caches_roll_back_by_the_same_rule(kind):
    model = GPT(CFG).eval()
    cache = model.new_cache(max_len=12) if kind is KVCache else model.new_static_cache(max_len=12)
    forward = model.forward if kind is KVCache else (lambda t, pos, c: model.forward_static(t, c))
    with torch.no_grad():
        forward(torch.zeros(1, 5, dtype=torch.long), torch.arange(5), cache)
    assert cache.length == 5
    cache.rollback(3)
    assert cache.length == 3
    for bad, error in [(4, ValueError), (-1, ValueError), (True, TypeError), (2.0, TypeError)]:
        with pytest.raises(error, match="roll back|rollback length"):
            cache.rollback(bad)
        assert cache.length == 3  # a refused rollback moves nothing
    cache.rollback(3)  # to the current length: allowed, a no-op
    cache.reset()
    assert cache.length == 0


class Recorder(HostLength):
    """A HostLength that records what rollback asks of it, and the length it sees when asked."""

    def __init__(self) -> None:
        self._length = 0
        self.forgot: list[tuple[int, int]] = []

    def _forget(self, n: int) -> None:
        self.forgot.append((n, self.length))


def test_host_length_calls_forget_before_moving_and_only_for_a_valid_target():
    c = Recorder()
    c._advance(4)
    c._advance(3)
    assert c.length == 7
    c.rollback(5)
    assert c.forgot == [(5, 7)] and c.length == 5  # _forget saw the old length
    with pytest.raises(ValueError, match=r"cannot roll back to length 6: it must lie in \[0, 5\]"):
        c.rollback(6)
    with pytest.raises(TypeError, match="rollback length must be an int, got bool"):
        c.rollback(False)
    assert c.forgot == [(5, 7)] and c.length == 5  # refused: nothing forgotten, nothing moved
    c.reset()
    assert c.forgot[-1] == (0, 5) and c.length == 0


def test_kvcache_is_a_host_length_and_the_static_cache_is_not():
    # the static cache keeps L on the device: a host-side length would need a sync per step
    assert issubclass(KVCache, HostLength) and not issubclass(StaticKVCache, HostLength)
    assert KVCache.rollback is HostLength.rollback


def test_reprs():
    assert repr(KVCache(2, 1, 2, 8, 4, "cpu", torch.float32)) == (
        "KVCache(length=0, capacity=8, batch=1, layers=2, dtype=torch.float32, device=cpu)")
    assert repr(StaticKVCache(2, 1, 2, 8, 4, "cpu", torch.float32)) == (
        "StaticKVCache(capacity=8, batch=1, layers=2, dtype=torch.float32, device=cpu)")


def test_the_model_module_still_exports_the_caches():
    from speclab import model

    assert model.KVCache is KVCache and model.StaticKVCache is StaticKVCache
