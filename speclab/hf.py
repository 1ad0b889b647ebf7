"""Hugging Face causal language models behind the course's model API.

Notation used across speclab: p = target distribution, q = draft distribution,
k = draft length, alpha = acceptance rate, c = T_target / T_draft.

`load_hf_pair(target, draft)` loads two causal language models (hub names or local
folders) and wraps each in an `HFCausalLM`, which offers exactly what the course's
`speclab.model.GPT` offers to a decoder:

    model.new_cache(batch, max_len)           an empty `HFCache`
    model(tokens [B, T], positions [T], cache) -> logits [B, T, V] (float32)
    cache.length, cache.rollback(n)           valid length; O(1) rollback
    model.reference_forward(tokens [B, T])    the library's own full forward, no cache
    model.cfg.vocab_size, model.cfg.max_len, model.device, model.dtype

so the Lab 2 decoder runs on a real pair unchanged. Each wrapper also carries the
tokenizer (`encode`, `decode`), so prompts and outputs can be strings.

The cache is the library's own `DynamicCache`; rollback is its `crop`, which slices
every layer's keys and values (a view, no copy): O(number of layers), independent
of the length. Only plain full-attention layers can be rolled back exactly, so a
model with sliding-window, chunked or linear-attention layers is refused.

Vocabularies. The two models must read the same tokenizer (same tokens, same ids);
`load_hf_pair` refuses a pair whose tokenizers differ. Checkpoints often pad their
embedding matrix beyond the tokenizer (to a multiple of 64 or 128), and a target and
its draft may be padded differently. Both wrappers then return logits over
V = the larger of the two models' rows; the model with fewer rows gets -inf (zero
probability) on the rows it lacks, so p is exactly the target's own distribution.
An id a model has no row for (a padding id the other model proposed or sampled) is
read by that model as `fallback_id` (the tokenizer's unknown token, else 0). Such an
input only ever precedes positions whose outputs the decoder discards (the target
gives the id probability 0, so a drafted one is rejected) or changes the draft's
proposals, never the law of the output.

Command line (the figures a decoder should reproduce on a pair, no decoder needed):

    python -m speclab.hf EleutherAI/pythia-1.4b-deduped EleutherAI/pythia-160m-deduped

prints alpha (at temperature 1 and greedy) along a text the target writes, the
measured c and v(k) = T_target(k+1) / T_target(1), and the predicted speedup
S(k) = E[N] / (k/c + v(k)) of every k (see book chapter 7).

Downloading: a hub name makes `from_pretrained` download (the library's own code
path, cached under ~/.cache/huggingface). Set HF_HUB_OFFLINE=1 to forbid it; the
course's tests and book build only ever load local folders.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Sequence

import torch

from speclab.hf_tiny import (TINY_ARCHITECTURES, TINY_TEXTS, _transformers, save_tiny_pair, tiny_config,  # noqa: F401
                             tiny_tokenizer)
from speclab.inputs import check_cache_batch, check_cache_room, check_positions, check_tokens
from speclab.kvcache import HostLength

__all__ = [
    "HFConfig", "HFCache", "HFCausalLM", "load_hf_pair", "check_same_tokenizer", "TokenizerMismatch",
    "PairReport", "pair_report", "save_tiny_pair", "main",
]


class TokenizerMismatch(ValueError):
    """The target and the draft do not read the same vocabulary with the same ids."""


@dataclass(frozen=True)
class HFConfig:
    """What the course's code reads from `model.cfg`, for a wrapped Hugging Face model."""

    name: str  # hub name or local folder the model was loaded from
    vocab_size: int  # V of the logits: the larger of the pair's two output layers
    own_vocab_size: int  # rows of this model's own output layer (<= vocab_size)
    max_len: int  # longest sequence the model accepts (max_position_embeddings)
    n_layer: int  # transformer blocks
    architecture: str  # the library's class name, e.g. LlamaForCausalLM


class HFCache(HostLength):
    """The library's DynamicCache with the course's interface: `length`, `rollback(n)`, `capacity`.

    Only slots [0, length) exist: `rollback(n)` crops every layer to n positions (a
    slice, no copy; O(number of layers)), so a rolled-back position cannot be read again.
    """

    def __init__(self, owner: "HFCausalLM", batch: int, capacity: int) -> None:
        if batch < 1 or capacity < 1:
            raise ValueError(f"cache batch and capacity must be >= 1, got batch={batch}, capacity={capacity}")
        tf = _transformers()
        self.owner = owner
        self.batch = batch
        self.capacity = capacity
        self.dynamic = tf.DynamicCache(config=owner.hf.config)
        for layer in self.dynamic.layers:  # empty when the library adds layers lazily (all plain then)
            if type(layer) is not tf.cache_utils.DynamicLayer:
                raise NotImplementedError(
                    f"{owner.cfg.name}: its cache has {type(layer).__name__} layers (sliding-window, chunked or "
                    "linear attention); only full-attention layers can be rolled back exactly"
                )
        self._length = 0

    def _forget(self, n: int) -> None:
        if n < self._length:
            self.dynamic.crop(n - self._length)  # a negative argument removes that many positions

    def _advance(self, t: int) -> None:
        super()._advance(t)
        got = self.dynamic.get_seq_length()
        if got != self._length:  # the library's own count must agree with ours
            raise RuntimeError(f"cache length out of sync: the library holds {got} positions, expected {self._length}")

    def __repr__(self) -> str:
        return f"HFCache(length={self.length}, capacity={self.capacity}, batch={self.batch}, model={self.owner.cfg.name!r})"


class HFCausalLM:
    """A Hugging Face causal LM with the course's model API (see the module docstring)."""

    def __init__(self, hf_model, tokenizer, name: str, vocab_size: int | None = None) -> None:
        self.hf = hf_model.eval()
        self.tokenizer = tokenizer
        text_cfg = hf_model.config.get_text_config(decoder=True)
        own = int(hf_model.get_output_embeddings().weight.shape[0])
        vocab_size = own if vocab_size is None else int(vocab_size)
        if vocab_size < own:
            raise ValueError(f"{name}: vocab_size {vocab_size} is smaller than the model's own {own} output rows")
        max_len = getattr(text_cfg, "max_position_embeddings", None) or getattr(text_cfg, "n_positions", None)
        if not max_len:
            raise ValueError(f"{name}: its config states no max_position_embeddings")
        self.cfg = HFConfig(
            name=name,
            vocab_size=vocab_size,
            own_vocab_size=own,
            max_len=int(max_len),
            n_layer=int(text_cfg.num_hidden_layers),
            architecture=type(hf_model).__name__,
        )
        unk = getattr(tokenizer, "unk_token_id", None)
        self.fallback_id = unk if isinstance(unk, int) and 0 <= unk < own else 0
        # transformers 5.2x renamed forward's `past_key_values` to `cache` (the old name warns and
        # goes away in 5.40); pass the cache under the name this model's forward declares
        params = inspect.signature(hf_model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"

    # -- properties -----------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.hf.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.hf.get_input_embeddings().weight.dtype

    def num_params(self) -> int:
        return sum(p.numel() for p in self.hf.parameters())

    def __repr__(self) -> str:
        c = self.cfg
        return (f"HFCausalLM({c.name!r}, {c.architecture}, {self.num_params():,} parameters, "
                f"V={c.vocab_size} (own {c.own_vocab_size}), {self.dtype}, {self.device})")

    # -- text -------------------------------------------------------------------------
    def encode(self, text: str) -> torch.Tensor:
        """Token ids [T] (LongTensor on the model's device) of a string, as the tokenizer writes them."""
        if not isinstance(text, str):
            raise TypeError(f"encode needs a str, got {type(text).__name__}")
        ids = self.tokenizer(text)["input_ids"]
        if not ids:
            raise ValueError(f"the tokenizer turns {text!r} into no tokens")
        return torch.tensor(ids, dtype=torch.long, device=self.device)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """The string of token ids (padding ids the tokenizer lacks are dropped)."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        n = len(self.tokenizer)
        return self.tokenizer.decode([int(i) for i in ids if 0 <= int(i) < n])

    # -- cache ------------------------------------------------------------------------
    def new_cache(self, batch: int = 1, max_len: int | None = None) -> HFCache:
        """An empty cache for up to max_len positions (default: the model's max_len)."""
        max_len = self.cfg.max_len if max_len is None else max_len
        if not 1 <= max_len <= self.cfg.max_len:
            raise ValueError(f"cache max_len must lie in [1, {self.cfg.max_len}] (the model's max_len), got {max_len}")
        return HFCache(self, batch, max_len)

    # -- input checks (speclab.inputs: the same as speclab.model.GPT's) -------------------
    def _check_cache(self, cache: HFCache, B: int, T: int) -> None:
        if not isinstance(cache, HFCache):
            raise TypeError(f"cache must be an HFCache (model.new_cache()) or None, got {type(cache).__name__}")
        if cache.owner is not self:
            raise ValueError(f"this cache was made by {cache.owner.cfg.name!r}, not by {self.cfg.name!r}")
        check_cache_batch(cache, B)
        check_cache_room(cache, T)

    def _model_ids(self, tokens: torch.Tensor) -> torch.Tensor:
        """Ids this model has rows for: a padding id it lacks becomes fallback_id (see the module docstring)."""
        if self.cfg.vocab_size == self.cfg.own_vocab_size:
            return tokens
        return torch.where(tokens < self.cfg.own_vocab_size, tokens, torch.full_like(tokens, self.fallback_id))

    def _pad(self, logits: torch.Tensor) -> torch.Tensor:
        """[B, T, own V] -> [B, T, V] float32, -inf on the rows this model lacks."""
        logits = logits.float()
        extra = self.cfg.vocab_size - logits.shape[-1]
        if extra:
            logits = torch.nn.functional.pad(logits, (0, extra), value=float("-inf"))
        return logits

    # -- forwards -------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None, cache: HFCache | None = None) -> torch.Tensor:
        """Logits [B, T, V] (float32) for tokens [B, T] at positions [T].

        With a cache, positions must equal cache.length + arange(T); cache.length advances
        by T. Without one, positions default to arange(T) and may be any contiguous run.
        """
        check_tokens(tokens, self.device, self.cfg.vocab_size)
        B, T = tokens.shape
        if cache is not None:
            self._check_cache(cache, B, T)
            start = cache.length
        else:
            start = int(positions.reshape(-1)[0]) if isinstance(positions, torch.Tensor) and positions.numel() else 0
        if positions is None:
            positions = torch.arange(start, start + T, device=self.device)
        check_positions(positions, start, T)
        if start + T > self.cfg.max_len:
            raise ValueError(f"positions {start}..{start + T - 1} exceed the model's max_len {self.cfg.max_len}")
        position_ids = positions.to(self.device, torch.long)[None].expand(B, T)  # [B, T]
        out = self.hf(
            input_ids=self._model_ids(tokens),
            position_ids=position_ids,
            use_cache=cache is not None,
            **{self._cache_kwarg: None if cache is None else cache.dynamic},
        )
        if cache is not None:
            cache._advance(T)
        return self._pad(out.logits)

    __call__ = forward

    @torch.no_grad()
    def reference_forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Oracle: the library's own full forward over positions 0..T-1, no cache."""
        check_tokens(tokens, self.device, self.cfg.vocab_size)
        if tokens.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds the model's max_len {self.cfg.max_len}")
        return self._pad(self.hf(input_ids=self._model_ids(tokens), use_cache=False).logits)


def check_same_tokenizer(target_tokenizer, draft_tokenizer, names: tuple[str, str] = ("target", "draft")) -> None:
    """Raise TokenizerMismatch unless both tokenizers map the same tokens to the same ids."""
    a, b = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if a == b:
        return
    only_a = sorted(set(a) - set(b), key=a.get)
    only_b = sorted(set(b) - set(a), key=b.get)
    moved = sorted((t for t in set(a) & set(b) if a[t] != b[t]), key=a.get)
    parts = [f"{names[0]} has {len(a)} tokens, {names[1]} has {len(b)}"]
    if moved:
        parts.append(f"{len(moved)} shared tokens have different ids, e.g. "
                     + ", ".join(f"{t!r}: {a[t]} vs {b[t]}" for t in moved[:3]))
    if only_a:
        parts.append(f"{len(only_a)} only in {names[0]}, e.g. {only_a[:3]}")
    if only_b:
        parts.append(f"{len(only_b)} only in {names[1]}, e.g. {only_b[:3]}")
    raise TokenizerMismatch(
        "the target and the draft use different tokenizers (" + "; ".join(parts) + "). Speculative decoding "
        "compares p and q token by token, so both models must read the same vocabulary with the same ids: "
        "pick a draft from the target's own family (e.g. Pythia 160M for Pythia 1.4B)."
    )


def _default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_hf_pair(
    target: str,
    draft: str,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    **from_pretrained_kwargs,
) -> tuple[HFCausalLM, HFCausalLM]:
    """(target, draft) wrapped for the course's decoders, on one device and in one dtype.

    target, draft: hub names (downloaded by the library unless HF_HUB_OFFLINE=1) or local
    folders holding a causal LM and its tokenizer. device defaults to CUDA if present.
    float32 keeps greedy speculative decoding token-for-token equal to greedy decoding;
    bfloat16 halves the memory but may flip near-ties between a (k+1)-token verify and
    one-token steps. Raises TokenizerMismatch if the tokenizers differ.
    """
    tf = _transformers()
    device = _default_device() if device is None else torch.device(device)
    tok_t = tf.AutoTokenizer.from_pretrained(target)
    tok_d = tf.AutoTokenizer.from_pretrained(draft)
    check_same_tokenizer(tok_t, tok_d, (f"target {target}", f"draft {draft}"))
    models = [tf.AutoModelForCausalLM.from_pretrained(name, dtype=dtype, **from_pretrained_kwargs).to(device)
              for name in (target, draft)]
    rows = [int(m.get_output_embeddings().weight.shape[0]) for m in models]
    if len(tok_t) > min(rows):
        raise ValueError(f"the tokenizer has {len(tok_t)} tokens but a model has only {min(rows)} output rows "
                         f"(target {rows[0]}, draft {rows[1]})")
    V = max(rows)
    return HFCausalLM(models[0], tok_t, target, V), HFCausalLM(models[1], tok_d, draft, V)


# ---------------------------------------------------------------- figures of a pair
NOISY_IQR = 0.5  # a timing whose interquartile range exceeds this share of its median is flagged
@dataclass(frozen=True)
class PairReport:
    """What a speculative decoder on this pair should see (book chapter 7, eq. of the measured speedup)."""

    tokens: int  # positions alpha was averaged over
    alpha: float  # mean over positions of sum_x min(p(x), q(x)) at `temperature`
    alpha_se: float  # its standard error (positions treated as independent: optimistic)
    greedy_agreement: float  # share of positions with argmax p = argmax q: alpha at temperature 0
    temperature: float
    c: float  # T_target(1) / T_draft(1), medians of interleaved repeats
    verify: dict  # k -> v(k) = T_target(k + 1) / T_target(1)
    predicted: dict  # k -> S(k) = E[N] / (k / c + v(k)) at this alpha
    context_len: int
    device: str
    noisy: tuple = ()  # labels of timings whose interquartile range exceeds NOISY_IQR of their median

    @property
    def best_k(self) -> int:
        return max(self.predicted, key=self.predicted.get)

    def __str__(self) -> str:
        rows = "\n".join(f"{k:3d}  {self.verify[k]:6.2f}  {self.predicted[k]:6.2f}" for k in self.predicted)
        warn = ""
        if self.noisy:
            warn = (f"\nunstable timings (interquartile range over {NOISY_IQR:.0%} of the median): "
                    f"{', '.join(self.noisy)}; re-run on a quiet machine or with more --repeats")
        return (f"{self.device}: alpha(T={self.temperature:g}) = {self.alpha:.3f} +- {self.alpha_se:.3f}, "
                f"greedy agreement = {self.greedy_agreement:.3f} ({self.tokens} positions); "
                f"c = {self.c:.2f} at context {self.context_len}\n  k    v(k)    S(k)\n{rows}\n"
                f"best k = {self.best_k}: predicted speedup {self.predicted[self.best_k]:.2f}{warn}")


@torch.no_grad()
def pair_report(
    target: HFCausalLM,
    draft: HFCausalLM,
    prompt: str,
    new_tokens: int = 128,
    temperature: float = 1.0,
    ks: Sequence[int] = (1, 2, 3, 4, 5, 6, 8),
    context_len: int = 128,
    repeats: int = 7,
    seed: int = 0,
) -> PairReport:
    """alpha, c, v(k) and the predicted speedup of a pair, measured on its own device.

    alpha is averaged over the positions of a text the target samples from `prompt` at
    `temperature` (the prefixes a decoder meets), with p and q from process_logits. The
    timings are speclab.measure's: cached forwards after context_len tokens, target and
    draft interleaved round-robin, medians after warm-up.
    """
    from speclab import measure, theory
    from speclab.sampling import generate, process_logits

    if temperature <= 0:
        raise ValueError(f"alpha is measured on a sampled text: temperature must be > 0, got {temperature}")
    ids = target.encode(prompt)
    gen = torch.Generator(device=target.device).manual_seed(seed)
    text = generate(target, ids[None], new_tokens, temperature=temperature, generator=gen)  # [1, T0 + n]
    p_logits = target.reference_forward(text)[0, ids.numel() - 1 : -1]  # rows predicting the new tokens
    q_logits = draft.reference_forward(text)[0, ids.numel() - 1 : -1]
    overlap = torch.minimum(process_logits(p_logits, temperature), process_logits(q_logits, temperature)).sum(-1)
    agree = (p_logits.argmax(-1) == q_logits.argmax(-1)).float()
    ks = sorted({int(k) for k in ks})
    t_fns = measure.forward_step_fns(target, [1] + [k + 1 for k in ks], context_len=context_len)
    d_fn = measure.forward_step_fns(draft, [1], context_len=context_len)[1]
    times = measure.time_interleaved([d_fn, *t_fns.values()], ["draft m=1"] + [f"target m={m}" for m in t_fns],
                                     repeats=repeats, warmup=2, device=target.device)
    t_draft, t_target = times[0].median, times[1].median
    # a pass over k + 1 tokens cannot cost less than one over 1 token: a ratio below 1 is timing noise
    verify = {k: max(1.0, times[1 + list(t_fns).index(k + 1)].median / t_target) for k in ks}
    alpha = float(overlap.mean())
    c = t_target / t_draft
    predicted = {k: float(theory.expected_tokens(min(alpha, 1.0), k)) / (k / c + verify[k]) for k in ks}
    se = float(overlap.std() / overlap.numel() ** 0.5) if overlap.numel() > 1 else float("nan")
    noisy = tuple(t.label for t in times if (t.quartiles[1] - t.quartiles[0]) > NOISY_IQR * t.median)
    return PairReport(tokens=int(overlap.numel()), alpha=alpha, alpha_se=se, greedy_agreement=float(agree.mean()),
                      temperature=temperature, c=c, verify=verify, predicted=predicted, context_len=context_len,
                      device=measure.device_name(target.device), noisy=noisy)


def main(argv: Sequence[str] | None = None) -> PairReport:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m speclab.hf", description="alpha, c, v(k) and predicted speedup of a "
                                 "Hugging Face target/draft pair (downloads hub names unless HF_HUB_OFFLINE=1)")
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--prompt", default="The history of the printing press begins")
    ap.add_argument("--tokens", type=int, default=128, help="new tokens the target writes for alpha")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--context", type=int, default=128, help="cached tokens before each timed forward")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--device", default=None, help="default: cuda if present, else cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = ap.parse_args(argv)
    target, draft = load_hf_pair(args.target, args.draft, device=args.device, dtype=getattr(torch, args.dtype))
    print(target, draft, sep="\n")
    report = pair_report(target, draft, args.prompt, args.tokens, args.temperature, context_len=args.context,
                         repeats=args.repeats)
    print(report)
    return report


if __name__ == "__main__":
    main()
