"""The input checks every model of the course runs before it computes anything.

Notation: see the `speclab` package docstring. Shapes: B batch, T new tokens, V vocabulary.

`speclab.model.GPT` (its cached, cache-free, reference and static forwards) and the Hugging Face
wrapper `speclab.hf.HFCausalLM` accept the same inputs, so they check them with the same functions
and a student's mistake reads the same whichever model it reached:

    check_tokens(tokens, device, V)      [B, T] int64 ids on the model's device, every id in [0, V)
    check_positions(positions, L, T)     positions continue the valid length: L, L+1, ..., L+T-1
    check_cache_batch(cache, B)          the cache was built for this batch
    check_cache_room(cache, T)           T more positions fit after cache.length
    check_rollback(n, L)                 a rollback target is an int in [0, L]

Each raises TypeError for a wrong kind of object and ValueError for a wrong value, with a message
that says what was expected and what came.
"""

from __future__ import annotations

import torch

__all__ = ["check_tokens", "check_positions", "check_cache_batch", "check_cache_room", "check_rollback"]

# Up to this many values, a check reads them to the host as one list: a decode step then pays one
# small copy instead of two reductions (or an arange and a comparison), each a kernel launch.
HOST_READ_MAX = 256


def check_tokens(tokens: torch.Tensor, device: torch.device, vocab_size: int | None = None) -> None:
    """tokens: [B, T] torch.long on `device`, B, T >= 1; with vocab_size V, every id in [0, V).

    vocab_size=None skips the ids, whose check reads the device: the static path (CUDA graphs)
    must not synchronise, and its callers guarantee the ids themselves.
    """
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape [B, T], got shape {tuple(tokens.shape)}")
    if tokens.dtype != torch.long:
        raise ValueError(f"tokens must be torch.long (int64), got {tokens.dtype}")
    if tokens.shape[0] < 1 or tokens.shape[1] < 1:
        raise ValueError(f"tokens must hold at least one token, got shape {tuple(tokens.shape)}")
    if tokens.device != device:
        raise ValueError(f"device mismatch: tokens are on {tokens.device}, the model is on {device}")
    if vocab_size is None:
        return
    if tokens.numel() <= HOST_READ_MAX:
        values = tokens.flatten().tolist()
        lo, hi = min(values), max(values)
    else:
        lo, hi = (int(v) for v in torch.aminmax(tokens))
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got values in [{lo}, {hi}]")


def check_positions(positions: torch.Tensor, start: int, T: int) -> None:
    """positions: a 1-D integer tensor equal to start, start + 1, ..., start + T - 1."""
    if not isinstance(positions, torch.Tensor) or positions.dim() != 1 or positions.shape[0] != T:
        shape = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise ValueError(f"positions must be a 1-D tensor of length T={T}, got {shape}")
    if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
        wrong = True
    elif T <= HOST_READ_MAX:
        wrong = positions.tolist() != list(range(start, start + T))
    else:
        wrong = not torch.equal(positions.long(), torch.arange(start, start + T, device=positions.device))
    if wrong:
        raise ValueError(
            f"positions must continue the valid cache length: expected {start}..{start + T - 1}, "
            f"got {positions.tolist() if T <= 16 else positions}"
        )


def check_cache_batch(cache, B: int) -> None:
    """The cache (anything with a `batch`) holds rows for exactly B sequences."""
    if cache.batch != B:
        raise ValueError(f"batch mismatch: tokens have batch {B}, the cache was built for batch {cache.batch}")


def check_cache_room(cache, T: int) -> None:
    """T new positions fit after the cache's valid length (anything with `length` and `capacity`)."""
    if cache.length + T > cache.capacity:
        raise ValueError(f"cache capacity exceeded: {cache.length} valid + {T} new tokens > capacity {cache.capacity}")


def check_rollback(n: int, length: int, accepted: str = "an int") -> None:
    """A rollback keeps positions [0, n): n must be an int (not a bool) in [0, length].

    accepted names what the caller's rollback takes, for the TypeError's message.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"rollback length must be {accepted}, got {type(n).__name__}")
    if not 0 <= n <= length:
        raise ValueError(f"cannot roll back to length {n}: it must lie in [0, {length}] (the valid length)")
