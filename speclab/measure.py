"""Measuring the machine: copy bandwidth, matmul throughput, forward times, bytes per decode step.

Notation: see the `speclab` package docstring.

Shared by the book (chapters 1 and 7), Lab 2 and the GPU report (benchmarks/gpu/report.py).
Every time here is taken by `speclab.timing` (median of repeats after warm-up, interleaved
ratios, a self-check of the noise) on the stopwatch of `speclab.clock`; the public names of
both are importable from this module too, which is where the book, the labs and the grader
import them from.

The byte and FLOP counts (``decode_step_bytes``, ``decode_step_flops``) are exact counts
for :class:`speclab.model.GPT` from its configuration; they count what a decode step must
read at the least (every weight once, the valid part of the KV cache) and ignore
activations, which are tiny at batch 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from speclab import clock, timing
from speclab.clock import *  # noqa: F403 - re-exported: the book, the labs and the grader import them from here
from speclab.clock import lazy_torch
from speclab.timing import *  # noqa: F403 - re-exported likewise

torch = lazy_torch(globals())  # the counts and Lab 1's timings need no torch

__all__ = clock.__all__ + timing.__all__ + [
    "copy_bytes",
    "copy_bandwidth",
    "matmul_flops",
    "matmul_throughput",
    "param_count",
    "decode_step_bytes",
    "decode_step_flops",
    "DecodeBytes",
    "roofline",
    "forward_step_fns",
    "forward_times",
]


# ---------------------------------------------------------------------- copy bandwidth
def copy_bytes(numel: int, dtype: torch.dtype | None = None) -> int:
    """Bytes moved by ``dst.copy_(src)`` of ``numel`` elements: each is read once and written once."""
    if numel < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    return 2 * numel * torch.empty((), dtype=torch.float32 if dtype is None else dtype).element_size()


@dataclass(frozen=True)
class Bandwidth:
    bytes_moved: int  # per copy: read + write
    timing: Timing

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_moved / self.timing.median


def copy_bandwidth(
    n_bytes: int = 64 * 2**20,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    repeats: int = 7,
    warmup: int = 2,
    budget_s: float = 0.0,
) -> Bandwidth:
    """Copy bandwidth: time ``dst.copy_(src)`` of a tensor of ``n_bytes`` (choose it well above
    the last-level cache, or the result is cache bandwidth) and count read + write bytes
    (dtype: default float32)."""
    dtype = torch.float32 if dtype is None else dtype
    element = torch.empty((), dtype=dtype).element_size()
    numel = n_bytes // element
    if numel < 1:
        raise ValueError(f"n_bytes={n_bytes} holds no element of {dtype}")
    src = torch.ones(numel, dtype=dtype, device=device)
    dst = torch.empty_like(src)
    timing = time_fn(lambda: dst.copy_(src), repeats, warmup, device, label=f"copy {n_bytes / 2**20:.0f} MiB",
                     budget_s=budget_s)
    return Bandwidth(copy_bytes(numel, dtype), timing)


# ------------------------------------------------------------------- matmul throughput
def matmul_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an [m, k] @ [k, n] product: m * n dot products of length k, a multiply and an add each."""
    if min(m, n, k) < 0:
        raise ValueError(f"matrix sizes must be >= 0, got m={m}, n={n}, k={k}")
    return 2 * m * n * k


@dataclass(frozen=True)
class Throughput:
    flops: int  # per call
    bytes_min: int  # the least a call must move: read both operands, write the result
    timing: Timing

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.timing.median

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte of compulsory traffic."""
        return self.flops / self.bytes_min


def matmul_throughput(
    m: int = 1024,
    n: int | None = None,
    k: int | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    repeats: int = 7,
    warmup: int = 2,
    budget_s: float = 0.0,
) -> Throughput:
    """FLOP/s of ``a @ b`` with a: [m, k], b: [k, n] (square when only m is given; dtype: default float32)."""
    dtype = torch.float32 if dtype is None else dtype
    n = m if n is None else n
    k = m if k is None else k
    if min(m, n, k) < 1:
        raise ValueError(f"matrix sizes must be >= 1, got m={m}, n={n}, k={k}")
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    timing = time_fn(lambda: torch.matmul(a, b, out=out), repeats, warmup, device, label=f"matmul {m}x{k}x{n} {dtype}",
                     budget_s=budget_s)
    element = a.element_size()
    return Throughput(matmul_flops(m, n, k), element * (m * k + k * n + m * n), timing)


def roofline(intensity, peak_flops: float, bytes_per_s: float):
    """Attainable FLOP/s at a given arithmetic intensity: min(peak, intensity * bandwidth)."""
    if peak_flops <= 0 or bytes_per_s <= 0:
        raise ValueError("peak_flops and bytes_per_s must be positive")
    import numpy as np

    return np.minimum(peak_flops, np.asarray(intensity, dtype=float) * bytes_per_s)


# ------------------------------------------------------------- bytes of a decode step
def param_count(cfg) -> int:
    """Parameters of speclab.model.GPT(cfg), counted from the configuration.

    embedding V*C (tied with the output head, stored once); per block two RMSNorm weights
    (2C), the fused qkv projection (3C*C), the output projection (C*C), the MLP
    (2 * mlp_ratio * C*C); the final RMSNorm (C).
    """
    C, V = cfg.d_model, cfg.vocab_size
    per_block = 2 * C + 3 * C * C + C * C + 2 * cfg.mlp_ratio * C * C
    return V * C + cfg.n_layer * per_block + C


def _matmul_params(cfg) -> int:
    """Weights used as a matrix in a matmul for every token: the blocks' linears and the tied head."""
    C, V = cfg.d_model, cfg.vocab_size
    return cfg.n_layer * (4 * C * C + 2 * cfg.mlp_ratio * C * C) + V * C


@dataclass(frozen=True)
class DecodeBytes:
    """Least bytes moved by one forward of T new tokens on a KV cache holding L positions."""

    weights: int  # every parameter read once
    kv_read: int  # keys and values of the L + T positions attended to, every layer
    kv_write: int  # keys and values of the T new positions, every layer

    @property
    def total(self) -> int:
        return self.weights + self.kv_read + self.kv_write


def _check_lengths(context_len: int, new_tokens: int, batch: int) -> None:
    if context_len < 0 or new_tokens < 1 or batch < 1:
        raise ValueError(
            f"need context_len >= 0, new_tokens >= 1, batch >= 1; got {context_len}, {new_tokens}, {batch}"
        )


def decode_step_bytes(
    cfg,
    context_len: int,
    new_tokens: int = 1,
    batch: int = 1,
    weight_bytes: int = 4,
    kv_bytes: int = 4,
) -> DecodeBytes:
    """Exact least traffic of one cached forward of ``new_tokens`` after ``context_len`` cached ones.

    weights: param_count(cfg) * weight_bytes (read once, whatever T and the batch are);
    KV read: 2 (K and V) * n_layer * batch * d_model * (L + T) * kv_bytes, since attention
    reads slots [0, L + T); KV write: 2 * n_layer * batch * d_model * T * kv_bytes.
    """
    _check_lengths(context_len, new_tokens, batch)
    per_position = 2 * cfg.n_layer * batch * cfg.d_model * kv_bytes  # K and V, all layers, all heads
    return DecodeBytes(
        weights=param_count(cfg) * weight_bytes,
        kv_read=per_position * (context_len + new_tokens),
        kv_write=per_position * new_tokens,
    )


def decode_step_flops(cfg, context_len: int, new_tokens: int = 1, batch: int = 1) -> int:
    """Matmul FLOPs of one cached forward: 2 per weight per token, plus attention.

    Attention per layer and token: q.k over L + T slots (2 C (L + T)) and the weighted sum
    of values (2 C (L + T)); the causal mask among the T new tokens is ignored (an upper
    bound by at most 2 C T per token). Norms, activations and softmax are left out.
    """
    _check_lengths(context_len, new_tokens, batch)
    tokens = batch * new_tokens
    attention = cfg.n_layer * 4 * cfg.d_model * (context_len + new_tokens)
    return tokens * (2 * _matmul_params(cfg) + attention)


# ------------------------------------------------------------------- forward timings
def forward_step_fns(model, new_tokens: Sequence[int], context_len: int = 128, batch: int = 1,
                     seed: int = 0) -> dict[int, Callable[[], object]]:
    """Closures, one per T in ``new_tokens``, each running one cached forward of T new tokens
    after ``context_len`` cached tokens (rolling the cache back first, O(1)).

    The cache is filled once with random tokens, so every call sees the same context and
    writes the same slots. Use with ``time_interleaved`` to time several models in one run.
    """
    sizes = [int(t) for t in new_tokens]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"new_tokens must be a non-empty list of ints >= 1, got {new_tokens!r}")
    if context_len < 1:
        raise ValueError(f"context_len must be >= 1 (the cache is filled first), got {context_len}")
    capacity = context_len + max(sizes)
    if capacity > model.cfg.max_len:
        raise ValueError(f"context_len + max(new_tokens) = {capacity} exceeds the model's max_len {model.cfg.max_len}")
    device = model.device
    gen = torch.Generator().manual_seed(seed)
    vocab = model.cfg.vocab_size
    context = torch.randint(vocab, (batch, context_len), generator=gen).to(device)
    cache = model.new_cache(batch=batch, max_len=capacity)
    with torch.inference_mode():
        model(context, torch.arange(context_len, device=device), cache)
    blocks = {t: torch.randint(vocab, (batch, t), generator=gen).to(device) for t in sizes}
    positions = {t: torch.arange(context_len, context_len + t, device=device) for t in sizes}

    def step(t: int) -> Callable[[], object]:
        @torch.inference_mode()
        def run():
            cache.rollback(context_len)
            return model(blocks[t], positions[t], cache)

        return run

    return {t: step(t) for t in sizes}


def forward_times(
    model,
    new_tokens: Sequence[int],
    context_len: int = 128,
    batch: int = 1,
    repeats: int = 7,
    warmup: int = 2,
    seed: int = 0,
    progress: bool | None = None,
    budget_s: float = 0.0,
    max_rel_iqr: float = MAX_REL_IQR,
) -> dict[int, Timing]:
    """Wall time of one cached forward of T new tokens after ``context_len`` cached tokens,
    for every T in ``new_tokens``, interleaved in one run.

    T = 1 is a decode step; T = k + 1 is the verification of k drafted tokens. ``budget_s`` and
    ``max_rel_iqr`` are the self-check of ``time_interleaved``; pass the result to
    ``quality_note`` to flag a larger T measured faster than a smaller one.
    """
    fns = forward_step_fns(model, new_tokens, context_len, batch, seed)
    timings = time_interleaved(list(fns.values()), [f"T={t}" for t in fns], repeats, warmup, model.device, progress,
                               budget_s, max_rel_iqr)
    return dict(zip(fns, timings))
