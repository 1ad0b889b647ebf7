"""The KV caches of `speclab.model.GPT`: pre-allocated keys and values, written by position.

Notation: see the `speclab` package docstring; shapes as in `speclab.model` (B batch, nh heads,
hs head size, L the valid length).

Both caches hold the same buffers and differ only in where the valid length L lives:

    KVCache        L is a Python int: `model(tokens, positions, cache)` reads and checks it for free
    StaticKVCache  L is a 0-d tensor on the cache's device: `model.forward_static` reads and advances
                   it there, so a decode step has fixed shapes and can be captured as a CUDA graph

Rollback only moves L, in O(1). Slots at or past L are never read as valid positions: the
cached forward slices the buffers to [0, L+T) before any arithmetic, the static forward masks
them out.

`HostLength` is the bookkeeping of a length kept on the host; `speclab.hf.HFCache` uses it too,
so every cache a course decoder meets rolls back with the same rule and the same errors.
"""

from __future__ import annotations

import torch

from speclab.inputs import check_cache_batch, check_rollback

__all__ = ["HostLength", "KVBuffers", "KVCache", "StaticKVCache"]


class HostLength:
    """A valid length L kept as a Python int: reading it costs nothing, `rollback(n)` moves it back.

    What a rollback must do besides moving L is the subclass's `_forget(n)`: nothing for KVCache,
    whose stale slots are never read; cropping the library's cache for HFCache.
    """

    _length = 0

    @property
    def length(self) -> int:
        """Number of valid positions (slots [0, length) may be attended to)."""
        return self._length

    def rollback(self, n: int) -> None:
        """Forget every position >= n (an int in [0, length])."""
        check_rollback(n, self._length)
        self._forget(n)
        self._length = n

    def reset(self) -> None:
        """Empty the cache (same as rollback(0))."""
        self.rollback(0)

    def _forget(self, n: int) -> None:
        """Called by rollback(n) before L moves; L is still the old length."""

    def _advance(self, t: int) -> None:
        """Called by the model after it wrote t new positions at [L, L + t)."""
        self._length += t


class KVBuffers:
    """Keys and values of every layer, k[i], v[i]: [B, nh, capacity, hs], allocated once.

    The part both caches share; a subclass says where the valid length L lives (it provides
    `length`, `rollback` and `reset`).
    """

    new_method = "new_cache"  # the model method that builds this kind of cache, named by error messages

    def __init__(
        self,
        n_layer: int,
        batch: int,
        n_head: int,
        capacity: int,
        head_dim: int,
        device: torch.device | str,
        dtype: torch.dtype,
    ) -> None:
        if batch < 1 or capacity < 1:
            raise ValueError(f"cache batch and capacity must be >= 1, got batch={batch}, capacity={capacity}")
        shape = (batch, n_head, capacity, head_dim)  # [B, nh, capacity, hs]
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]

    @property
    def capacity(self) -> int:
        return self.k[0].shape[2]

    @property
    def batch(self) -> int:
        return self.k[0].shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.k[0].dtype

    @property
    def device(self) -> torch.device:
        return self.k[0].device

    @property
    def n_layer(self) -> int:
        return len(self.k)

    def check_fits(self, cfg, B: int, dtype: torch.dtype, device: torch.device) -> None:
        """Raise ValueError unless a model of shape `cfg` running in `dtype` on `device` can use this
        cache for tokens of batch B. Reads host metadata only (no device sync)."""
        if self.n_layer != cfg.n_layer or self.k[0].shape[1] != cfg.n_head or self.k[0].shape[3] != cfg.head_dim:
            raise ValueError(
                f"cache was built for a different model shape (layers/heads/head size); use model.{self.new_method}()"
            )
        check_cache_batch(self, B)
        if self.dtype != dtype:
            raise ValueError(f"dtype mismatch: the cache holds {self.dtype}, the model runs in {dtype}")
        if self.device != device:
            raise ValueError(f"device mismatch: the cache is on {self.device}, the model is on {device}")

    def _describe(self) -> str:
        return (f"capacity={self.capacity}, batch={self.batch}, layers={self.n_layer}, "
                f"dtype={self.dtype}, device={self.device}")


class KVCache(HostLength, KVBuffers):
    """The cache of `model(tokens, positions, cache)`: L is a Python int.

    Only slots [0, length) hold valid entries; `rollback(n)` moves `length` back in O(1) and
    copies nothing.
    """

    def __init__(self, n_layer, batch, n_head, capacity, head_dim, device, dtype) -> None:
        super().__init__(n_layer, batch, n_head, capacity, head_dim, device, dtype)
        self._length = 0

    def __repr__(self) -> str:
        return f"KVCache(length={self.length}, {self._describe()})"


class StaticKVCache(KVBuffers):
    """The cache of the static path: L lives in a 0-d device tensor, so nothing on the host needs
    to read it per step.

    length_t: 0-d int64 on the cache's device. `model.forward_static` reads length_t, writes slots
    [L, L+T) and adds T to it, all as device operations, which is what lets a whole decode step be
    captured once and replayed (CUDA graphs) or compiled without graph breaks. Rollback with an int
    checks the range (one host read of L); rollback with a device tensor copies it with no check
    and no sync.
    """

    new_method = "new_static_cache"

    def __init__(self, n_layer, batch, n_head, capacity, head_dim, device, dtype) -> None:
        super().__init__(n_layer, batch, n_head, capacity, head_dim, device, dtype)
        self.length_t = torch.zeros((), dtype=torch.long, device=device)  # L, on the device
        self.slots = torch.arange(capacity, device=device)  # [capacity], slot indices for the mask

    @property
    def length(self) -> int:
        """L as a Python int. Reads the device (a sync on a GPU): for tests and bookkeeping, not per step."""
        return int(self.length_t)

    def rollback(self, n: "int | torch.Tensor") -> None:
        """Forget every position >= n; only the length moves.

        n an int: checked against [0, L] (reads L once). n a 0-d integer tensor on the cache's
        device: copied as is, no check and no host sync (the fast decoders' path).
        """
        if isinstance(n, torch.Tensor):
            if n.dim() != 0 or n.dtype in (torch.bool,) or n.is_floating_point() or n.device != self.device:
                raise ValueError(f"rollback tensor must be a 0-d integer tensor on {self.device}, got {n.dtype} {tuple(n.shape)} on {n.device}")
            self.length_t.copy_(n)
            return
        check_rollback(n, self.length, "an int or a 0-d device tensor")
        self.length_t.fill_(n)

    def reset(self) -> None:
        """Empty the cache (same as rollback(0)), without a host sync."""
        self.length_t.zero_()

    def rollback_unchecked(self, n: int) -> None:
        """Set L = n with one device write and no check: for decoders that track every length on the
        host (the greedy graphed decoders of speclab.graphed). n must lie in [0, L]; a larger n
        would expose slots that hold no valid position. Prefer rollback() anywhere else."""
        self.length_t.fill_(n)

    def __repr__(self) -> str:  # no length: reading it would synchronise a GPU
        return f"StaticKVCache({self._describe()})"
