"""Training a named pair (`python -m speclab.train --pair ...`) with bf16 autocast and a time budget,
and loading it back with `load_pair(preset=...)`; a missing pair names the command that trains it.

The GPU pair itself needs a GPU (issue 21); here the same code path runs on the CPU with the
"tiny" pair, whose recipe is 20 steps of 4 x 32 bytes.
"""

from __future__ import annotations

import json
import pytest
import torch

from speclab.checkpoints import CheckpointError, load_pair, pair_directory, retrain_command
from speclab.model import PAIRS, PRESETS, GPTConfig
from speclab.train import RECIPES, batch_at, main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    out, work = root / "w", root / "runs"
    main(["--pair", "tiny", "--out", str(out), "--work", str(work), "--device", "cpu", "--amp", "bf16"])
    return out


def test_every_pair_has_presets_and_recipes():
    for pair, (target, draft) in PAIRS.items():
        assert target in PRESETS and draft in PRESETS and target in RECIPES and draft in RECIPES, pair
        assert PRESETS[target].vocab_size == PRESETS[draft].vocab_size
    gt, gd = PRESETS["gpu-target"], PRESETS["gpu-draft"]
    assert gt.n_layer > gd.n_layer and RECIPES["gpu-target"]["batch"] > RECIPES["target"]["batch"]


def test_tiny_pair_trains_with_bf16_autocast_and_loads_back(tiny_pair):
    manifest = json.loads((tiny_pair / "manifest.json").read_text())
    assert set(manifest) == {"tiny", "tiny-draft"}
    for name in ("tiny", "tiny-draft"):
        training = manifest[name]["training"]
        assert training["amp"] == "bf16" and training["steps"] == RECIPES[name]["steps"] and training["budget"] is None
    assert manifest["tiny-draft"]["training"]["distilled_from_target"] is True
    target, draft = load_pair(preset="tiny", directory=tiny_pair)
    assert target.cfg == GPTConfig.preset("tiny") and draft.cfg == GPTConfig.preset("tiny-draft")

    # 20 steps must have learned something: the trained target beats its untrained twin (about
    # 5.4 nats) on next-byte cross-entropy of training windows by half a nat (1.6 after 30 steps)
    from speclab.data import load_split
    from speclab.model import GPT

    data = torch.frombuffer(bytearray(load_split("train")), dtype=torch.uint8)
    xy = batch_at(data, 10_000, 32, 32, 7)
    torch.manual_seed(1234)
    untrained = GPT(GPTConfig.preset("tiny")).eval()

    def nll(model):
        with torch.no_grad():
            logits = model(xy[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 256), xy[:, 1:].reshape(-1)).item()

    assert nll(target) < nll(untrained) - 0.5, (nll(target), nll(untrained))


def ten_ms_per_step(fn, device=None) -> float:
    """A stopwatch on which every training step takes 10 ms, however fast the machine is."""
    fn()
    return 0.010


@pytest.mark.parametrize("budget_min, steps", [
    (0.0001, 1),  # 6 ms: less than one 10.3 ms step (10 ms and the loop's 3 %), still one step
    (0.001, 5),  # 60 ms: int(60 / 10.3) = 5 steps, below the recipe's ceiling of 20
    (0.01, 20),  # 600 ms: 58 steps fit, the recipe's 20 are trained
])
def test_budget_fits_the_step_count(tmp_path, budget_min, steps):
    from speclab.measure import use_stopwatch

    with use_stopwatch(ten_ms_per_step):
        main(["--pair", "tiny", "--only", "target", "--out", str(tmp_path / "w"), "--work", str(tmp_path / "r"),
              "--device", "cpu", "--budget-min", str(budget_min)])
    training = json.loads((tmp_path / "w" / "manifest.json").read_text())["tiny"]["training"]
    budget = training["budget"]
    assert budget["budget_s"] == pytest.approx(60 * budget_min) and budget["ceiling_steps"] == RECIPES["tiny"]["steps"]
    assert budget["measured_step_s"] == pytest.approx(0.0103)
    assert training["steps"] == steps


def test_missing_gpu_pair_names_the_training_command(tmp_path):
    with pytest.raises(CheckpointError, match="missing") as err:
        load_pair(preset="gpu", directory=tmp_path / "nowhere")
    assert f"python -m speclab.train --pair gpu --out {tmp_path / 'nowhere'}" in str(err.value)
    assert retrain_command("gpu") == "python -m speclab.train --pair gpu"
    assert pair_directory("gpu").name == "gpu" and pair_directory("shipped").name == "weights"
    with pytest.raises(ValueError, match="unknown pair preset"):
        load_pair(preset="huge")


def test_evaluate_reads_a_named_pair(tiny_pair):
    from speclab.evaluate import main as evaluate

    res = evaluate(["--pair", "tiny", "--weights", str(tiny_pair), "--skip-timing", "--max-bytes", "2048", "--window", "64"])
    assert res["pair"] == "tiny" and res["heldout"]["bytes"] == 2048
    assert 0 < res["heldout"]["draft_alpha"]["mean"] <= 1


def test_model_card_gpu_parameter_counts_match_the_presets():
    from pathlib import Path

    import torch

    from speclab.model import GPT

    card = (Path(__file__).resolve().parents[2] / "speclab" / "MODEL_CARD.md").read_text()
    with torch.device("meta"):  # shapes only, no memory
        counts = [GPT(PRESETS[name]).num_params() for name in ("gpu-target", "gpu-draft")]
    assert f"| {counts[0]:,} | {counts[1]:,} |" in card
    assert "awaiting a GPU run" in card  # no GPU figure is claimed before a GPU run


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_training_on_cuda_without_a_gpu_says_so(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--pair", "tiny", "--device", "cuda", "--out", str(tmp_path)])
    assert "sees no CUDA device" in capsys.readouterr().err
