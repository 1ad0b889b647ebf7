"""speclab.hf: Hugging Face causal LMs behind the course's model API, tested offline.

Notation: p = target distribution, q = draft distribution, k = draft length.

Tiny random models are built here from the library's own configs (LlamaConfig,
GPT2Config, Qwen3Config with grouped-query attention, GPTNeoXConfig as Pythia), saved with a word-level
tokenizer trained on three strings, and loaded back through load_hf_pair: the
library's code paths run end to end and nothing is downloaded (HF_HUB_OFFLINE=1).
The oracles are the library's own: its full forward and its greedy `generate`.
"""
from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # set before transformers is imported: a hub name fails instead of downloading

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason='speclab.hf needs the [hf] extra: pip install -e ".[hf]"')
import huggingface_hub.constants  # noqa: E402

# the library reads the variable when it is first imported: make sure this run really is offline
assert huggingface_hub.constants.HF_HUB_OFFLINE, "HF_HUB_OFFLINE was not in effect: the tests could download"

from autograder.checks.stats import ExactnessCase, case_false_failure_bound, check_case, power_lower_bound  # noqa: E402
from speclab.hf import (  # noqa: E402
    HFCache,
    TokenizerMismatch,
    load_hf_pair,
    save_tiny_pair,
    tiny_config,
    tiny_tokenizer,
)
from speclab.sampling import generate  # noqa: E402
from speclab.toy import sequence_law  # noqa: E402

# arch -> (target_extra_rows, draft_extra_rows): the target padded beyond the tokenizer,
# the draft padded beyond it, and neither
PAIRS = {"llama": (2, 0), "gpt2": (0, 2), "qwen3": (0, 0), "gpt_neox": (1, 0)}
N_TOK = 4  # <unk>, red, green, blue


def lab2_reference():
    """The Lab 2 reference decoder, executed from the lab's one source (solutions/lab2/lab2.md)."""
    from autograder.authoring import reference

    return reference.load("lab2")


@pytest.fixture(scope="module")
def ref():
    return lab2_reference()


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """arch -> (target, draft), loaded through load_hf_pair from folders saved here."""
    root = tmp_path_factory.mktemp("hf")
    out = {}
    for arch, (te, de) in PAIRS.items():
        paths = save_tiny_pair(root / arch, arch, target_extra_rows=te, draft_extra_rows=de)
        out[arch] = load_hf_pair(*paths, device="cpu")
    paths = save_tiny_pair(root / "mixed", "llama", draft_arch="gpt2", target_extra_rows=1)
    out["llama+gpt2"] = load_hf_pair(*paths, device="cpu")
    return out


def random_tokens(n: int, seed: int, high: int = N_TOK) -> torch.Tensor:
    return torch.randint(high, (1, n), generator=torch.Generator().manual_seed(seed))


def library_logits(model, tokens: torch.Tensor) -> torch.Tensor:
    """The library's own full forward, outside the wrapper: [B, T, own V]."""
    with torch.no_grad():
        return model.hf(input_ids=tokens).logits.float()


# ------------------------------------------------------------------ the model API
def test_wrapper_shapes_and_padding(pairs):
    for arch, (te, de) in PAIRS.items():
        target, draft = pairs[arch]
        V = N_TOK + max(te, de)
        assert target.cfg.vocab_size == draft.cfg.vocab_size == V
        assert (target.cfg.own_vocab_size, draft.cfg.own_vocab_size) == (N_TOK + te, N_TOK + de)
        x = random_tokens(5, 0)
        for model in (target, draft):
            logits = model.reference_forward(x)
            assert logits.shape == (1, 5, V) and logits.dtype == torch.float32
            own = model.cfg.own_vocab_size
            assert torch.isinf(logits[..., own:]).all() and (logits[..., own:] < 0).all(), "rows a model lacks must be -inf"
            assert torch.isfinite(logits[..., :own]).all()
    assert pairs["qwen3"][0].hf.config.num_key_value_heads < pairs["qwen3"][0].hf.config.num_attention_heads  # GQA


@pytest.mark.parametrize("arch", [*PAIRS, "llama+gpt2"])
def test_cached_forward_equals_library_forward(pairs, arch):
    x = random_tokens(11, 1)
    for model in pairs[arch]:
        want = library_logits(model, x)  # [1, 11, own V]
        cache = model.new_cache(batch=1, max_len=16)
        got, start = [], 0
        for size in (3, 1, 4, 2, 1):  # a prefill, then blocks of the sizes a decoder uses
            got.append(model(x[:, start:start + size], torch.arange(start, start + size), cache))
            start += size
            assert cache.length == start
        got = torch.cat(got, dim=1)[..., : model.cfg.own_vocab_size]
        err = float((got - want).abs().max())
        assert err < 1e-4, f"{arch} {model.cfg.architecture}: cached forward differs from the library's full forward by {err:.3g}"
        # without a cache, at a shifted contiguous run of positions, as the library computes it
        with torch.no_grad():
            shifted = model.hf(input_ids=x[:, :4], position_ids=torch.arange(5, 9)[None]).logits.float()
        got = model(x[:, :4], torch.arange(5, 9))[..., : model.cfg.own_vocab_size]
        assert float((got - shifted).abs().max()) < 1e-4


@pytest.mark.parametrize("arch", list(PAIRS))
def test_rollback_then_new_tokens_equals_fresh_forward(pairs, arch):
    a, b = random_tokens(9, 2), random_tokens(4, 3)
    for model in pairs[arch]:
        cache = model.new_cache(batch=1, max_len=12)
        model(a, torch.arange(9), cache)
        keys_before = cache.dynamic.layers[0].keys
        cache.rollback(5)
        assert cache.length == 5 and cache.dynamic.get_seq_length() == 5
        # O(1): the crop is a view of the same storage, nothing was copied
        assert cache.dynamic.layers[0].keys.data_ptr() == keys_before.data_ptr()
        got = model(b, torch.arange(5, 9), cache)  # different tokens where the rolled-back ones were
        seq = torch.cat([a[:, :5], b], dim=1)
        want = library_logits(model, seq)[:, 5:]
        err = float((got[..., : model.cfg.own_vocab_size] - want).abs().max())
        assert err < 1e-4, f"{arch}: after a rollback, logits differ from a fresh forward by {err:.3g}"
        cache.rollback(0)
        assert cache.length == 0
        got = model(seq[:, :3], torch.arange(3), cache)
        assert float((got[..., : model.cfg.own_vocab_size] - library_logits(model, seq[:, :3])).abs().max()) < 1e-4


def test_bad_inputs_are_refused_clearly(pairs):
    target, draft = pairs["llama"]
    cache = target.new_cache(batch=1, max_len=4)
    with pytest.raises(ValueError, match="positions must continue"):
        target(random_tokens(2, 0), torch.arange(1, 3), cache)
    target(random_tokens(3, 0), torch.arange(3), cache)
    with pytest.raises(ValueError, match="capacity exceeded"):
        target(random_tokens(2, 0), torch.arange(3, 5), cache)
    with pytest.raises(ValueError, match="made by"):
        draft(random_tokens(1, 0), torch.arange(3, 4), cache)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 6\)"):
        target(torch.tensor([[6]]), torch.arange(1))
    with pytest.raises(ValueError, match="cannot roll back"):
        cache.rollback(4)
    with pytest.raises(TypeError, match="HFCache"):
        target(random_tokens(1, 0), torch.arange(1), object())
    with pytest.raises(ValueError, match="max_len"):
        target.new_cache(batch=1, max_len=target.cfg.max_len + 1)
    assert isinstance(cache, HFCache)


@pytest.mark.parametrize("tokens, positions", [
    ([[1]], None),
    (torch.zeros(3, dtype=torch.long), None),
    (torch.zeros(1, 0, dtype=torch.long), None),
    (torch.zeros(1, 2), None),
    (torch.tensor([[0, 6]]), None),
    (torch.tensor([[0, 1]]), torch.tensor([0, 2])),
    (torch.tensor([[0, 1]]), torch.tensor([0.0, 1.0])),
    (torch.tensor([[0, 1]]), [0, 1]),
])
def test_wrapper_and_gpt_share_their_input_checks(pairs, tokens, positions):
    """One set of input checks (speclab.inputs): a wrong input gets the same error from a Hugging Face
    model and from the course's GPT of the same vocabulary."""
    from speclab.model import GPT, GPTConfig

    target, _ = pairs["llama"]
    gpt = GPT(GPTConfig(n_layer=1, n_head=2, d_model=16, vocab_size=target.cfg.vocab_size, max_len=64))
    errors = []
    for model in (target, gpt):
        with pytest.raises(Exception) as err:
            model(tokens, positions)
        errors.append(f"{type(err.value).__name__}: {err.value}")
    assert errors[0] == errors[1]


def test_hf_cache_rolls_back_by_the_course_rule(pairs):
    from speclab.kvcache import HostLength
    from speclab.model import GPT, GPTConfig

    target, _ = pairs["llama"]
    hf_cache = target.new_cache(max_len=8)
    gpt_cache = GPT(GPTConfig(n_layer=1, n_head=2, d_model=16, max_len=8)).new_cache()
    assert isinstance(hf_cache, HostLength)
    for cache, forward in ((hf_cache, target), (gpt_cache, None)):
        if forward is not None:
            forward(random_tokens(3, 1), torch.arange(3), cache)
        else:
            cache._advance(3)
    for bad in (4, -1, True, 1.5):
        messages = []
        for cache in (hf_cache, gpt_cache):
            with pytest.raises((TypeError, ValueError)) as err:
                cache.rollback(bad)
            messages.append(f"{type(err.value).__name__}: {err.value}")
        assert messages[0] == messages[1]
    hf_cache.rollback(1)
    assert hf_cache.length == 1 and hf_cache.dynamic.get_seq_length() == 1  # the library's cache was cropped too


def test_different_tokenizers_are_refused(tmp_path):
    t_path, _ = save_tiny_pair(tmp_path / "a", "llama")
    _, d_path = save_tiny_pair(tmp_path / "b", "llama", texts=("one two three", "two one"))
    with pytest.raises(TokenizerMismatch, match="different tokenizers.*same vocabulary with the same ids"):
        load_hf_pair(t_path, d_path, device="cpu")
    # same tokens, two ids swapped: still refused
    tok = tiny_tokenizer()
    vocab = tok.get_vocab()
    swapped = {w: (vocab["blue"] if w == "red" else vocab["red"] if w == "blue" else i) for w, i in vocab.items()}
    from tokenizers import Tokenizer, models, pre_tokenizers

    raw = Tokenizer(models.WordLevel(swapped, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>").save_pretrained(tmp_path / "swap")
    transformers.AutoModelForCausalLM.from_config(tiny_config("llama", N_TOK, 1)).save_pretrained(tmp_path / "swap")
    with pytest.raises(TokenizerMismatch, match="2 shared tokens have different ids"):
        load_hf_pair(t_path, str(tmp_path / "swap"), device="cpu")


def test_hub_names_do_not_download_in_tests():
    with pytest.raises(OSError):
        load_hf_pair("EleutherAI/pythia-1.4b", "EleutherAI/pythia-160m", device="cpu")


def test_sliding_window_layers_are_refused(tmp_path):
    cfg = transformers.MistralConfig(vocab_size=N_TOK, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                                     sliding_window=4)
    for name in ("t", "d"):
        transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / name)
        tiny_tokenizer().save_pretrained(tmp_path / name)
    target, _ = load_hf_pair(str(tmp_path / "t"), str(tmp_path / "d"), device="cpu")
    with pytest.raises(NotImplementedError, match="rolled back exactly"):
        target.new_cache(batch=1, max_len=8)


# ------------------------------------------------------------------ the Lab 2 decoder, unchanged
def library_greedy(model, prompt: torch.Tensor, n_new: int) -> list[int]:
    out = model.hf.generate(prompt[None], max_new_tokens=n_new, do_sample=False,
                            attention_mask=torch.ones_like(prompt[None]))
    new = out[0, prompt.numel():].tolist()
    assert len(new) == n_new, "the library stopped early (an end token in the config?)"
    return new


@pytest.mark.parametrize("arch", [*PAIRS, "llama+gpt2"])
def test_greedy_speculative_equals_library_generate(pairs, ref, arch):
    target, draft = pairs[arch]
    n_new = 24
    accepted_any = rejected_any = False
    for seed in range(2):
        prompt = random_tokens(6, 10 + seed)[0]
        want = library_greedy(target, prompt, n_new)
        assert generate(target, prompt[None], n_new, temperature=0)[0, 6:].tolist() == want
        assert ref.autoregressive_decode(target, prompt, n_new, temperature=0.0) == want
        for k in (1, 2, 4):
            got, acc = ref.speculative_decode(target, draft, prompt, n_new, k, temperature=0.0)
            assert list(got) == want, f"{arch}, k={k}: speculative output {got} differs from the library's greedy {want}"
            accepted_any |= any(a > 0 for a in acc)
            rejected_any |= any(a < k for a in acc[:-1])  # the last step may be cut short
    assert accepted_any and rejected_any, f"{arch}: the runs must include both accepted and rejected drafts"


def test_text_in_text_out(pairs, ref):
    target, draft = pairs["llama"]
    prompt = target.encode("red green blue red")
    assert prompt.tolist() == [target.tokenizer.get_vocab()[w] for w in "red green blue red".split()]
    new, _ = ref.speculative_decode(target, draft, prompt, 8, 3, temperature=0.0)
    assert new == library_greedy(target, prompt, 8)
    text = target.decode(new)
    words = [target.tokenizer.convert_ids_to_tokens(i) for i in new if i < N_TOK]
    assert text.split() == words, "decode drops only the padding ids the tokenizer lacks"
    assert target.decode(prompt) == "red green blue red"


# ------------------------------------------------------------------ sampled exactness
# The same test as the toy pair's (autograder/checks/lab2.py, sampling): n i.i.d. runs of the
# decoder from a one-token prompt, 2 new tokens each; the exact law of the 2 new tokens under p is
# enumerated with the wrapper's reference forward (speclab.toy.sequence_law), and the check fails
# when the total variation between the n samples and that law passes its threshold
# (autograder/checks/stats.py). n is the smallest on a doubling grid from the stated one at which
# the exact power bound against the wrong laws named in the test reaches 0.999.
ALPHA_CASE = 1e-6  # false-failure budget of each case (union bound, any seed)
PROMPT = [2]
N_NEW = 2
SAMPLED = {  # name -> (arch, k, temperature, top_k, top_p, n)
    "llama, target padded, T=1, k=1": ("llama", 1, 1.0, None, None, 400),
    "gpt2, draft padded, T=0.8, top-p 0.9, k=2": ("gpt2", 2, 0.8, None, 0.9, 200),
    "qwen3 GQA, T=1.2, top-k 3, k=1": ("qwen3", 1, 1.2, 3, None, 200),
}


def _case(pairs, name):
    arch, k, temp, top_k, top_p, n = SAMPLED[name]
    target, draft = pairs[arch]
    law, conts = sequence_law(target, PROMPT, N_NEW, temp, top_k, top_p)
    index = {c: i for i, c in enumerate(conts)}

    def draw(fn, rng, n):
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        out = np.empty(n, dtype=np.int64)
        for j in range(n):
            new, _ = fn(target, draft, torch.tensor(PROMPT), N_NEW, k, temperature=temp, top_k=top_k, top_p=top_p,
                        generator=gen)
            out[j] = index[tuple(int(x) for x in new)]
        return out

    labels = [f"continuation {c}" for c in conts]
    wrong = [sequence_law(draft, PROMPT, N_NEW, temp, top_k, top_p)[0]]  # output follows q
    if target.cfg.own_vocab_size > N_TOK:
        wrong.append(_law_without_padding(target, temp, top_k, top_p))
    for size in (n, 2 * n, 4 * n, 8 * n, 16 * n):
        case = ExactnessCase(name, law, size, draw, labels)
        if min(power_lower_bound(case, ALPHA_CASE, w) for w in wrong) >= 0.999:
            break
    return case, (target, draft, temp, top_k, top_p)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SAMPLED))
def test_sampled_speculative_is_exact(pairs, ref, name):
    """False failure <= ALPHA_CASE per case, computed below; power computed below as well:

    * against a decoder whose output follows the draft's law q (it never rejects): >= 0.999;
    * in the main (llama) case, against a wrapper that drops the target's padding rows
      (p renormalised over the tokenizer's ids): >= 0.999.
    """
    case, (target, draft, temp, top_k, top_p) = _case(pairs, name)
    assert case_false_failure_bound(case, ALPHA_CASE) <= ALPHA_CASE * (1 + 1e-9)  # equal by construction, up to rounding
    q_law, _ = sequence_law(draft, PROMPT, N_NEW, temp, top_k, top_p)
    power_q = power_lower_bound(case, ALPHA_CASE, q_law)
    assert power_q >= 0.999, f"{name}: the test is too weak against 'output follows q' (power {power_q:.4f})"
    if target.cfg.own_vocab_size > N_TOK:
        dropped = _law_without_padding(target, temp, top_k, top_p)
        power_d = power_lower_bound(case, ALPHA_CASE, dropped)
        assert power_d >= 0.999, f"{name}: too weak against dropped padding rows (power {power_d:.4f})"
    check_case(case, ref.speculative_decode, np.random.default_rng(2026), ALPHA_CASE)


def _law_without_padding(target, temp, top_k, top_p) -> np.ndarray:
    """The continuation law a wrapper would give if it cut the target's logits to the tokenizer's ids."""
    from speclab.sampling import process_logits

    law, conts = sequence_law(target, PROMPT, N_NEW, temp, top_k, top_p)
    out = np.zeros(len(conts))
    for i, c in enumerate(conts):
        if max(c) >= N_TOK:
            continue
        logits = target.reference_forward(torch.tensor([PROMPT + list(c)]))[0, :, :N_TOK]
        probs = process_logits(logits, temp, top_k, top_p).double()
        out[i] = probs[0, c[0]].item() * probs[1, c[1]].item()
    return out / out.sum()


def test_sampled_check_catches_a_wrong_decoder(pairs):
    """The exactness test must be able to fail: a decoder that keeps every draft (output ~ q) fails it."""
    name = "llama, target padded, T=1, k=1"
    case, _ = _case(pairs, name)

    def accept_all(target, draft, prompt, n_new, k, temperature, top_k, top_p, generator):
        from speclab.sampling import process_logits

        seq = prompt.tolist()
        for _ in range(n_new):
            q = process_logits(draft.reference_forward(torch.tensor([seq]))[0, -1], temperature, top_k, top_p)
            seq.append(int(torch.multinomial(q, 1, generator=generator)))
        return seq[len(prompt):], []

    small = ExactnessCase(case.name, case.law, 150, case.draw, case.labels)
    with pytest.raises(AssertionError, match="do not follow the target distribution"):
        check_case(small, accept_all, np.random.default_rng(0), ALPHA_CASE)


# ------------------------------------------------------------------ figures of a pair
def test_pair_report_of_a_model_with_itself(pairs):
    """A draft identical to the target: alpha = 1 and greedy agreement = 1 exactly; S(k) follows from c, v(k)."""
    from speclab.hf import pair_report
    from speclab.theory import expected_tokens

    target, draft = pairs["llama"]
    same = pair_report(target, target, "red green blue", new_tokens=12, ks=(1, 3), context_len=8, repeats=1)
    assert abs(same.alpha - 1) < 1e-5 and same.greedy_agreement == 1.0 and same.tokens == 12
    for k in (1, 3):
        assert same.verify[k] >= 1.0
        assert abs(same.predicted[k] - (k + 1) / (k / same.c + same.verify[k])) < 1e-9
    other = pair_report(target, draft, "red green blue", new_tokens=12, ks=(2,), context_len=8, repeats=1)
    assert 0 < other.alpha < 1, "a different draft must lose some acceptance"
    assert abs(other.predicted[2] - expected_tokens(other.alpha, 2) / (2 / other.c + other.verify[2])) < 1e-9
    assert "best k" in str(other)


def test_command_line_on_local_folders(tmp_path, capsys):
    from speclab.hf import main

    paths = save_tiny_pair(tmp_path, "gpt_neox", target_extra_rows=1)
    report = main([*paths, "--prompt", "red", "--tokens", "6", "--context", "4", "--repeats", "1", "--device", "cpu"])
    out = capsys.readouterr().out
    assert "GPTNeoXForCausalLM" in out and f"alpha(T=1) = {report.alpha:.3f}" in out
