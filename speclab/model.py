"""A tiny byte-level GPT with a pre-allocated, rollback-able KV cache.

Notation: see the `speclab` package docstring.
This module only builds models; whether a model plays p (target) or q (draft)
is decided by the preset it is built from.

Shape glossary (used in every shape comment below):
    B  batch size            T  number of new tokens in this forward
    L  valid cache length before this forward (cache.length)
    S  L + T, the number of key/value slots a query may look at
    C  d_model = nh * hs     nh number of heads    hs head size
    V  vocabulary size (256: one token per byte)

Three ways to run the same weights:
    model(tokens, positions, cache)   incremental: reads slots [0, L), writes [L, L+T)
    model(tokens, positions, None)    plain causal forward over a contiguous run of positions
    model.reference_forward(tokens)   slow, cache-free oracle with hand-written attention

Rollback is `cache.rollback(n)`: it only moves the length pointer. Stale slots
past the pointer are never read because attention slices the buffers to
[0, L+T) before any arithmetic, so even NaN left there cannot reach an output.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["GPTConfig", "GPT", "KVCache", "PRESETS"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a decoder-only transformer; every field is a hyper-parameter."""

    n_layer: int = 6  # number of transformer blocks
    n_head: int = 8  # attention heads per block (nh)
    d_model: int = 256  # residual stream width (C = nh * hs)
    vocab_size: int = 256  # one token per byte; draft and target must agree
    max_len: int = 1024  # longest sequence (positions 0 .. max_len-1) the model accepts
    mlp_ratio: int = 4  # hidden width of the MLP is mlp_ratio * d_model
    rope_base: float = 10000.0  # base of the rotary position embedding frequencies
    norm_eps: float = 1e-5  # epsilon of the RMS norms

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "max_len", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.head_dim % 2:
            raise ValueError(f"head size d_model/n_head={self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        """hs: width of one attention head."""
        return self.d_model // self.n_head

    @classmethod
    def preset(cls, name: str) -> "GPTConfig":
        """The named configuration (see PRESETS)."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return PRESETS[name]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# The shipped pair. Sizes were chosen by measuring the cached per-token decode
# latency on a 2-core CPU (see MODEL_CARD.md): at these widths the cost of a
# forward is dominated by per-layer overhead, so the draft has one block and the
# target several; both read the same 256-byte vocabulary.
PRESETS: dict[str, GPTConfig] = {
    "target": GPTConfig(n_layer=6, n_head=4, d_model=256),
    "draft": GPTConfig(n_layer=1, n_head=4, d_model=256),
    # a very small model for fast unit tests; never shipped
    "tiny": GPTConfig(n_layer=2, n_head=2, d_model=32, max_len=64),
}


class KVCache:
    """Pre-allocated keys and values of every layer, written by position.

    k[i], v[i]: [B, nh, capacity, hs] for layer i. Only slots [0, length) hold
    valid entries; `rollback(n)` moves `length` back in O(1) and copies nothing.
    """

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
        self._length = 0

    @property
    def length(self) -> int:
        """Number of valid positions (slots [0, length) may be attended to)."""
        return self._length

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

    def rollback(self, n: int) -> None:
        """Forget every position >= n. O(1): only the length pointer moves."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"rollback length must be an int, got {type(n).__name__}")
        if not 0 <= n <= self._length:
            raise ValueError(f"cannot roll back to length {n}: it must lie in [0, {self._length}] (the valid length)")
        self._length = n

    def reset(self) -> None:
        """Empty the cache (same as rollback(0))."""
        self._length = 0

    def _advance(self, t: int) -> None:
        self._length += t

    def __repr__(self) -> str:
        return (
            f"KVCache(length={self.length}, capacity={self.capacity}, batch={self.batch}, "
            f"layers={self.n_layer}, dtype={self.dtype}, device={self.device})"
        )


def rope_tables(max_len: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, each [max_len, hs/2], in float32."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))  # [hs/2]
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [max_len, hs/2]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (even, odd) pair of x by the angle of its position.

    x: [B, nh, T, hs]; cos, sin: [T, hs/2] for the positions of the T rows.
    """
    x1, x2 = x[..., 0::2], x[..., 1::2]  # [B, nh, T, hs/2] each
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)  # [B, nh, T, hs/2, 2]
    return out.flatten(-2)  # [B, nh, T, hs]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def _heads(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x [B, T, C]
        q, k, v = (z.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for z in (q, k, v))  # [B, nh, T, hs]
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def _merge(self, y: torch.Tensor) -> torch.Tensor:
        B, nh, T, hs = y.shape
        return self.proj(y.transpose(1, 2).reshape(B, T, nh * hs))  # [B, T, C]

    def forward(self, x, cos, sin, cache: KVCache | None, layer: int) -> torch.Tensor:
        q, k, v = self._heads(x, cos, sin)  # [B, nh, T, hs]
        T = q.shape[2]
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, nh, T, hs]
            return self._merge(y)
        L = cache.length
        S = L + T
        cache.k[layer][:, :, L:S] = k
        cache.v[layer][:, :, L:S] = v
        # Slice BEFORE any arithmetic: slots >= S (stale after a rollback) are never touched.
        keys = cache.k[layer][:, :, :S]  # [B, nh, S, hs]
        values = cache.v[layer][:, :, :S]  # [B, nh, S, hs]
        if T == 1:
            y = F.scaled_dot_product_attention(q, keys, values)  # the one query sees all S slots
        else:
            # query i sits at position L+i and may see slots j <= L+i
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=L)  # [T, S]
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self._merge(y)

    def reference(self, x, cos, sin) -> torch.Tensor:
        """Attention written out by hand: softmax(q k^T / sqrt(hs) + causal mask) v."""
        q, k, v = self._heads(x, cos, sin)  # [B, nh, T, hs]
        T = q.shape[2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # [B, nh, T, T]
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(v.dtype)  # [B, nh, T, T]
        return self._merge(weights @ v)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, cache, layer) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin, cache, layer)
        return x + self.mlp(self.norm2(x))

    def reference(self, x, cos, sin) -> torch.Tensor:
        x = x + self.attn.reference(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """Decoder-only transformer over bytes. The output head is tied to the embedding."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if not isinstance(cfg, GPTConfig):
            raise TypeError(f"GPT needs a GPTConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm_f = RMSNorm(cfg.d_model, cfg.norm_eps)
        cos, sin = rope_tables(cfg.max_len, cfg.head_dim, cfg.rope_base)
        # not saved in checkpoints: rebuilt from the config
        self.register_buffer("rope_cos", cos, persistent=False)  # [max_len, hs/2]
        self.register_buffer("rope_sin", sin, persistent=False)  # [max_len, hs/2]
        self.apply(self._init_weights)
        for block in self.blocks:  # scale residual projections as in GPT-2
            for lin in (block.attn.proj, block.mlp.down):
                nn.init.normal_(lin.weight, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    # -- properties -----------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(
        self,
        batch: int = 1,
        max_len: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> KVCache:
        """An empty KV cache for this model; defaults: cfg.max_len slots, the model's device and dtype."""
        max_len = self.cfg.max_len if max_len is None else max_len
        if not 1 <= max_len <= self.cfg.max_len:
            raise ValueError(f"cache max_len must lie in [1, {self.cfg.max_len}] (the model's max_len), got {max_len}")
        return KVCache(
            self.cfg.n_layer,
            batch,
            self.cfg.n_head,
            max_len,
            self.cfg.head_dim,
            device=self.device if device is None else device,
            dtype=self.dtype if dtype is None else dtype,
        )

    # -- input checks ---------------------------------------------------------------
    def _check_tokens(self, tokens: torch.Tensor) -> None:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a torch.Tensor, got {type(tokens).__name__}")
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape [B, T], got shape {tuple(tokens.shape)}")
        if tokens.dtype != torch.long:
            raise ValueError(f"tokens must be torch.long (int64), got {tokens.dtype}")
        if tokens.shape[0] < 1 or tokens.shape[1] < 1:
            raise ValueError(f"tokens must hold at least one token, got shape {tuple(tokens.shape)}")
        if tokens.device != self.device:
            raise ValueError(f"device mismatch: tokens are on {tokens.device}, the model is on {self.device}")
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= self.cfg.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.cfg.vocab_size}), got values in [{lo}, {hi}]")

    def _check_positions(self, positions: torch.Tensor, start: int, T: int) -> None:
        if not isinstance(positions, torch.Tensor) or positions.dim() != 1 or positions.shape[0] != T:
            shape = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
            raise ValueError(f"positions must be a 1-D tensor of length T={T}, got {shape}")
        expected = torch.arange(start, start + T, device=positions.device)
        if positions.dtype == torch.bool or positions.is_floating_point() or not torch.equal(positions.long(), expected):
            raise ValueError(
                f"positions must continue the valid cache length: expected {start}..{start + T - 1}, "
                f"got {positions.tolist() if T <= 16 else positions}"
            )

    def _check_cache(self, cache: KVCache, B: int, T: int) -> None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache or None, got {type(cache).__name__}")
        if cache.n_layer != self.cfg.n_layer or cache.k[0].shape[1] != self.cfg.n_head or cache.k[0].shape[3] != self.cfg.head_dim:
            raise ValueError("cache was built for a different model shape (layers/heads/head size); use model.new_cache()")
        if cache.batch != B:
            raise ValueError(f"batch mismatch: tokens have batch {B}, the cache was built for batch {cache.batch}")
        if cache.dtype != self.dtype:
            raise ValueError(f"dtype mismatch: the cache holds {cache.dtype}, the model runs in {self.dtype}")
        if cache.device != self.device:
            raise ValueError(f"device mismatch: the cache is on {cache.device}, the model is on {self.device}")
        if cache.length + T > cache.capacity:
            raise ValueError(
                f"cache capacity exceeded: {cache.length} valid + {T} new tokens > capacity {cache.capacity}"
            )

    # -- forwards -------------------------------------------------------------------
    def forward(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Logits [B, T, V] (float32) for tokens [B, T] at positions [T].

        With a cache, positions must equal cache.length + arange(T); the new keys and
        values are written at those slots and cache.length advances by T. Without a
        cache, positions default to arange(T) and may be any contiguous run start + arange(T).
        """
        self._check_tokens(tokens)
        B, T = tokens.shape
        if cache is not None:
            self._check_cache(cache, B, T)
            start = cache.length
        else:
            start = 0
            if isinstance(positions, torch.Tensor) and positions.numel() > 0:
                start = int(positions.reshape(-1)[0])
        if positions is None:
            positions = torch.arange(start, start + T, device=self.device)
        self._check_positions(positions, start, T)
        if start + T > self.cfg.max_len:
            raise ValueError(f"positions {start}..{start + T - 1} exceed the model's max_len {self.cfg.max_len}")
        cos = self.rope_cos[start : start + T]  # [T, hs/2]
        sin = self.rope_sin[start : start + T]
        x = self.embed(tokens)  # [B, T, C]
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, cache, i)
        if cache is not None:
            cache._advance(T)
        logits = F.linear(self.norm_f(x), self.embed.weight)  # [B, T, V]
        return logits.float()

    @torch.no_grad()
    def reference_forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Slow, cache-free oracle: full causal forward over positions 0..T-1 with explicit attention."""
        self._check_tokens(tokens)
        T = tokens.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"sequence length {T} exceeds the model's max_len {self.cfg.max_len}")
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.embed(tokens)  # [B, T, C]
        for block in self.blocks:
            x = block.reference(x, cos, sin)
        return F.linear(self.norm_f(x), self.embed.weight).float()  # [B, T, V]
