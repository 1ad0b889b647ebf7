"""Saving and loading the shipped pair, verified against a sha256 manifest.

Notation: see the `speclab` package docstring.

The weights live in `speclab/weights/` as fp16 safetensors (`target.safetensors`,
`draft.safetensors`) beside `manifest.json`, which records each file's sha256, its
config and how it was trained. `load_pair()` checks every hash before it builds a model.

Other pairs (`speclab.model.PAIRS`, e.g. the GPU pair "gpu") are too big to commit; their
weights go to `speclab/weights/<pair>/` when `python -m speclab.train --pair <pair>` trains
them, and `load_pair(preset="gpu")` says exactly that when they are missing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from speclab.model import GPT, PAIRS, GPTConfig

__all__ = ["WEIGHTS_DIR", "RETRAIN_COMMAND", "pair_directory", "retrain_command", "CheckpointError", "load_pair", "load_model", "save_model", "file_sha256", "default_dtype"]

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
RETRAIN_COMMAND = "python -m speclab.train"


class CheckpointError(RuntimeError):
    """A shipped checkpoint is missing, corrupted or does not fit its manifest."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_dtype(device: torch.device) -> torch.dtype:
    """fp32 on CPU (and MPS), bf16 on CUDA where supported, else fp16."""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def save_model(model: GPT, path: Path) -> None:
    """Write the parameters as fp16 safetensors (the tied output head is stored once)."""
    tensors = {name: t.detach().to("cpu", torch.float16).contiguous() for name, t in model.state_dict().items()}
    save_file(tensors, str(path), metadata={"config": json.dumps(model.cfg.to_dict())})


def pair_directory(preset: str) -> Path:
    """Default folder of a pair's weights: speclab/weights/ for the shipped pair, speclab/weights/<pair>/ otherwise."""
    if preset not in PAIRS:
        raise ValueError(f"unknown pair preset {preset!r}; choose one of {sorted(PAIRS)}")
    return WEIGHTS_DIR if preset == "shipped" else WEIGHTS_DIR / preset


def retrain_command(preset: str = "shipped", directory: Path | None = None) -> str:
    """The command that (re)trains a pair into directory."""
    cmd = RETRAIN_COMMAND if preset == "shipped" else f"{RETRAIN_COMMAND} --pair {preset}"
    if directory is not None and Path(directory) != pair_directory(preset):
        cmd += f" --out {directory}"
    return cmd


_HOW_LONG = {
    "shipped": "under an hour on a 2-core CPU",
    "gpu": "about 20 minutes on one H100-class GPU, bf16; it needs CUDA",
    "tiny": "seconds, on any machine",
}


def _retrain_hint(directory: Path, preset: str = "shipped") -> str:
    return (f"Retrain the pair with `{retrain_command(preset, directory)}` "
            f"({_HOW_LONG.get(preset, 'see speclab/MODEL_CARD.md')}; see speclab/MODEL_CARD.md).")


def _read_manifest(directory: Path, preset: str = "shipped") -> dict:
    path = directory / "manifest.json"
    if not path.is_file():
        raise CheckpointError(f"checkpoint manifest {path} is missing. {_retrain_hint(directory, preset)}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint manifest {path} is not valid JSON ({err}). {_retrain_hint(directory, preset)}") from err


def load_model(
    name: str,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    directory: Path | str | None = None,
    preset: str = "shipped",
) -> GPT:
    """One checkpoint (e.g. "target", "draft", "gpu-target"), sha256-verified, in eval mode, on device in dtype.

    preset names the pair it belongs to; it picks the default directory and the retrain command
    that the error messages give.
    """
    directory = pair_directory(preset) if directory is None else Path(directory)
    device = torch.device(device)
    dtype = default_dtype(device) if dtype is None else dtype
    manifest = _read_manifest(directory, preset)
    if name not in manifest:
        raise CheckpointError(f"the manifest in {directory} has no entry {name!r}. {_retrain_hint(directory, preset)}")
    entry = manifest[name]
    path = directory / entry["file"]
    if not path.is_file():
        raise CheckpointError(f"checkpoint file {path} is missing. {_retrain_hint(directory, preset)}")
    digest = file_sha256(path)
    if digest != entry["sha256"]:
        raise CheckpointError(
            f"checkpoint file {path} is corrupted: its sha256 is {digest}, the manifest expects {entry['sha256']}. "
            f"{_retrain_hint(directory, preset)}"
        )
    cfg = GPTConfig(**entry["config"])
    model = GPT(cfg)
    state = load_file(str(path))
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    if missing or unexpected:
        raise CheckpointError(f"checkpoint file {path} does not fit its config: missing {missing}, unexpected {unexpected}")
    return model.to(device=device, dtype=dtype).eval()


def load_pair(
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    directory: Path | str | None = None,
    preset: str = "shipped",
) -> tuple[GPT, GPT]:
    """(target, draft): a pair's models, checksum-verified, in eval mode.

    preset: "shipped" (default, the committed pair) or another name in speclab.model.PAIRS,
    e.g. "gpu", whose weights are trained by `python -m speclab.train --pair gpu`; a missing
    checkpoint raises CheckpointError naming that command. dtype defaults to fp32 on CPU and
    bf16 (or fp16) on CUDA. Both models read the same 256-byte vocabulary, so p and q are
    distributions over the same tokens.
    """
    if preset not in PAIRS:
        raise ValueError(f"unknown pair preset {preset!r}; choose one of {sorted(PAIRS)}")
    target_name, draft_name = PAIRS[preset]
    target = load_model(target_name, device, dtype, directory, preset)
    draft = load_model(draft_name, device, dtype, directory, preset)
    if target.cfg.vocab_size != draft.cfg.vocab_size:
        raise CheckpointError("target and draft checkpoints have different vocabularies")
    return target, draft
