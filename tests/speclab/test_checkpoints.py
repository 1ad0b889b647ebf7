"""The checkpoint loader (sha256 manifest, clear errors that say how to retrain) and the shipped pair."""

from __future__ import annotations

import json

import pytest
import torch

from speclab.checkpoints import RETRAIN_COMMAND, WEIGHTS_DIR, CheckpointError, file_sha256, load_model, load_pair
from speclab.data import corpus_files, encode
from speclab.model import GPT, GPTConfig
from speclab.sampling import generate
from speclab.train import batch_at, lr_at, save_weights


def saved_tiny(tmp_path, name: str = "target") -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig.preset("tiny")).eval()
    save_weights(model, name, tmp_path, meta={"note": "test"})
    return model


def test_round_trip_restores_the_fp16_rounded_weights(tmp_path):
    model = saved_tiny(tmp_path)
    loaded = load_model("target", directory=tmp_path)
    assert not loaded.training and loaded.dtype == torch.float32 and loaded.cfg == model.cfg
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a.half().float(), b), name
    tokens = torch.randint(0, 256, (1, 10))
    torch.testing.assert_close(loaded(tokens), model(tokens), atol=2e-3, rtol=0)  # fp16 storage


def test_manifest_records_the_sha256(tmp_path):
    saved_tiny(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["target"]["sha256"] == file_sha256(tmp_path / "target.safetensors")
    assert manifest["target"]["config"] == GPTConfig.preset("tiny").to_dict()


def test_corrupted_checkpoint_is_rejected_with_the_retrain_command(tmp_path):
    saved_tiny(tmp_path)
    path = tmp_path / "target.safetensors"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01  # one flipped bit in the last weight
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="corrupted") as err:
        load_model("target", directory=tmp_path)
    assert RETRAIN_COMMAND in str(err.value)


def test_missing_checkpoint_file_is_reported(tmp_path):
    saved_tiny(tmp_path)
    (tmp_path / "target.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing") as err:
        load_model("target", directory=tmp_path)
    assert RETRAIN_COMMAND in str(err.value)


def test_missing_manifest_is_reported(tmp_path):
    with pytest.raises(CheckpointError, match="manifest") as err:
        load_pair(directory=tmp_path)
    assert RETRAIN_COMMAND in str(err.value)


def test_missing_entry_is_reported(tmp_path):
    saved_tiny(tmp_path, "target")
    with pytest.raises(CheckpointError, match="'draft'"):
        load_pair(directory=tmp_path)


@pytest.mark.parametrize("step, expected", [(0, 1e-3 / 10), (9, 1e-3), (10, 1e-3), (55, 0.55e-3), (100, 1e-4)])
def test_learning_rate_schedule_hand_values(step, expected):
    # peak 1e-3, 10 warm-up steps, 100 in all: cosine from 1e-3 at step 10 to 1e-4 at step 100;
    # halfway (step 55) it is 1e-4 + 0.9e-3 * 0.5 = 5.5e-4
    assert lr_at(step, 100, 1e-3, 10) == pytest.approx(expected)


def test_training_batches_depend_only_on_seed_and_step():
    data = torch.arange(1000) % 256
    a, b = batch_at(data, 7, 4, 16, seed=1), batch_at(data, 7, 4, 16, seed=1)
    assert torch.equal(a, b) and a.shape == (4, 17)
    assert not torch.equal(a, batch_at(data, 8, 4, 16, seed=1))
    assert all(((row[1:] - row[:-1]) % 256 == 1).all() for row in a)  # each window is contiguous


def test_train_and_heldout_files_are_disjoint():
    train, held = set(corpus_files("train")), set(corpus_files("heldout"))
    assert train and held and not train & held
    assert 0.03 < len(held) / (len(held) + len(train)) < 0.2  # about HELDOUT_PERCENT of the files


# -- the shipped pair --------------------------------------------------------------------


def test_shipped_pair_loads_verified_and_fits_the_budget():
    target, draft = load_pair(device="cpu")
    assert not target.training and not draft.training
    assert target.dtype == draft.dtype == torch.float32
    assert target.cfg.vocab_size == draft.cfg.vocab_size == 256
    manifest = json.loads((WEIGHTS_DIR / "manifest.json").read_text())
    total = sum((WEIGHTS_DIR / entry["file"]).stat().st_size for entry in manifest.values())
    assert total <= 30 * 2**20


def test_shipped_pair_predicts_python_far_better_than_chance():
    # a loading check, not the model card's figure: uniform guessing costs 8 bits/byte,
    # and the card reports about 1.8 for the target on the full held-out split
    target, draft = load_pair()
    text = encode("import os\nimport sys\n\n\ndef main(argv=None):\n    if argv is None:\n        argv = sys.argv[1:]\n")[None]
    for model in (target, draft):
        logits = model(text[:, :-1])
        bits = torch.nn.functional.cross_entropy(logits[0], text[0, 1:]) / torch.log(torch.tensor(2.0))
        assert bits < 4.0


def test_shipped_pair_greedy_generation_is_deterministic():
    target, _ = load_pair()
    prompt = encode("def ")[None]
    assert torch.equal(generate(target, prompt, 24, temperature=0), generate(target, prompt, 24, temperature=0))


def test_shipped_pair_loads_in_bfloat16():
    target, draft = load_pair(dtype=torch.bfloat16)
    assert target.dtype == draft.dtype == torch.bfloat16
    out = target(encode("x = 1")[None])
    assert out.dtype == torch.float32 and torch.isfinite(out).all()


# -- the evaluation code behind the model card's figures ----------------------------------


def test_heldout_figures_of_a_model_against_itself_and_another():
    from speclab.evaluate import heldout_figures

    torch.manual_seed(0)
    a, b = GPT(GPTConfig.preset("tiny")).eval(), GPT(GPTConfig.preset("tiny")).eval()
    with torch.no_grad():
        for param in b.parameters():
            param.mul_(20.0)  # a sharper, different distribution
    figs = heldout_figures(a, {"same": a, "other": b}, window=64, max_bytes=2048, batch=8)
    assert figs["windows"] == 32
    assert figs["same_alpha"]["mean"] == pytest.approx(1.0, abs=1e-5)
    assert figs["same_agree"]["mean"] == 1.0
    assert figs["same_bits"]["mean"] == pytest.approx(figs["target_bits"]["mean"], abs=1e-6)
    assert figs["other_alpha"]["mean"] < 0.9
    # an untrained model is close to uniform: about 8 bits per byte
    assert figs["target_bits"]["mean"] == pytest.approx(8.0, abs=0.2)


def test_timing_helpers_return_ratios():
    from speclab.evaluate import decode_cost_ratio, verify_cost_curve

    torch.manual_seed(0)
    model = GPT(GPTConfig.preset("tiny")).eval()
    cost = decode_cost_ratio(model, model, context=8, repeats=5, warmup=1)
    assert cost["c"] > 0 and cost["target_s"] > 0
    curve = verify_cost_curve(model, context=8, max_m=3, repeats=3, warmup=1)
    assert curve["relative"][1] == 1.0 and set(curve["relative"]) == {1, 2, 3}
