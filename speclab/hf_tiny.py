"""Tiny random Hugging Face pairs, built offline in a second (re-exported by `speclab.hf`).

Notation: see the `speclab` package docstring (p = target, q = draft).

Used by the tests and the book (chapter 7): a real library model and tokenizer, so every code
path of the `speclab.hf` wrapper runs without a download. `save_tiny_pair(folder)` writes a
target and a draft that `speclab.hf.load_hf_pair` loads like any checkpoint.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

__all__ = ["TINY_ARCHITECTURES", "TINY_TEXTS", "tiny_tokenizer", "tiny_config", "save_tiny_pair"]


def _transformers():
    """The transformers module, or an ImportError that says how to install the [hf] extra (the one place
    that says it: speclab.hf uses this too)."""
    try:
        import transformers
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError('speclab.hf needs the optional dependency transformers: pip install -e ".[hf]"') from err
    return transformers


TINY_ARCHITECTURES = ("llama", "gpt2", "qwen3", "gpt_neox")
TINY_TEXTS = ("red green blue", "blue red", "green green red")  # a 3-word vocabulary plus <unk>


def tiny_tokenizer(texts: Sequence[str] = TINY_TEXTS):
    """A word-level tokenizer trained on `texts` (plus an <unk> token), as a PreTrainedTokenizerFast."""
    tf = _transformers()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins word tokens with spaces
    tok.train_from_iterator(list(texts), trainers.WordLevelTrainer(special_tokens=["<unk>"]))
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


def tiny_config(arch: str, vocab_size: int, n_layer: int, init_std: float = 0.3, max_len: int = 64):
    """A library config of a very small model: width 16, `n_layer` blocks, no special tokens.

    llama: LlamaConfig, multi-head attention (2 query heads, 2 key/value heads);
    gpt2: GPT2Config (learned positions, LayerNorm, tied head);
    qwen3: Qwen3Config with grouped-query attention (4 query heads share 1 key/value head);
    gpt_neox: GPTNeoXConfig, the architecture of Pythia (parallel residual, rotary on a quarter
    of each head, untied head).
    init_std is the library's initializer_range: large enough that next-token distributions
    are far from uniform, so draft and target disagree visibly.
    """
    tf = _transformers()
    common = dict(vocab_size=vocab_size, initializer_range=init_std, bos_token_id=None, eos_token_id=None,
                  pad_token_id=None)
    if arch == "llama":
        return tf.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=n_layer, num_attention_heads=2,
                              num_key_value_heads=2, max_position_embeddings=max_len, **common)
    if arch == "gpt2":
        return tf.GPT2Config(n_embd=16, n_layer=n_layer, n_head=2, n_positions=max_len, **common)
    if arch == "qwen3":
        return tf.Qwen3Config(hidden_size=16, intermediate_size=32, num_hidden_layers=n_layer, num_attention_heads=4,
                              num_key_value_heads=1, head_dim=8, max_position_embeddings=max_len, **common)
    if arch == "gpt_neox":
        return tf.GPTNeoXConfig(hidden_size=16, intermediate_size=64, num_hidden_layers=n_layer, num_attention_heads=2,
                                max_position_embeddings=max_len, rotary_pct=0.25, **common)
    raise ValueError(f"unknown tiny architecture {arch!r}; choose one of {TINY_ARCHITECTURES}")


def save_tiny_pair(
    folder,
    arch: str = "llama",
    draft_arch: str | None = None,
    texts: Sequence[str] = TINY_TEXTS,
    target_extra_rows: int = 0,
    draft_extra_rows: int = 0,
    seed: int = 0,
    init_std: float = 0.3,
) -> tuple[str, str]:
    """Save a random 2-block target and a 1-block draft (and their shared tokenizer) under folder.

    When both have the same architecture the draft is the target cut after its first block
    (the weights they share are copied), so q resembles p and drafts are often accepted;
    otherwise the draft is random too. *_extra_rows pad a model's vocabulary beyond the
    tokenizer, as real checkpoints do; the padding rows are zero (each gets the probability
    of a logit of 0). Returns the two model folders, ready for load_hf_pair. Nothing is
    downloaded.
    """
    tf = _transformers()
    tokenizer = tiny_tokenizer(texts)
    draft_arch = draft_arch or arch
    models = {}
    for role, a, layers, extra, s in (("target", arch, 2, target_extra_rows, 2 * seed + 1),
                                      ("draft", draft_arch, 1, draft_extra_rows, 2 * seed + 2)):
        torch.manual_seed(s)
        model = tf.AutoModelForCausalLM.from_config(tiny_config(a, len(tokenizer) + extra, layers, init_std))
        with torch.no_grad():  # padding rows (never trained in a real checkpoint) give logit 0
            model.get_output_embeddings().weight[len(tokenizer):] = 0
            model.get_input_embeddings().weight[len(tokenizer):] = 0
        models[role] = model
    if draft_arch == arch:
        shared = models["target"].state_dict()
        with torch.no_grad():
            for name, param in models["draft"].state_dict().items():
                if name in shared:
                    rows = min(param.shape[0], shared[name].shape[0]) if param.dim() else None
                    if param.dim() and param.shape[1:] == shared[name].shape[1:]:
                        param[:rows] = shared[name][:rows]  # vocabulary rows may differ in number
    paths = []
    for role, model in models.items():
        path = Path(folder) / f"{role}-{type(model).__name__}"
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        paths.append(str(path))
    return paths[0], paths[1]
