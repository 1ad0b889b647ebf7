"""Saving and loading the shipped pair, verified against a sha256 manifest.

Notation: see the `speclab` package docstring.

The weights live in `speclab/weights/` as fp16 safetensors (`target.safetensors`,
`draft.safetensors`) beside `manifest.json`, which records each file's sha256, its
config and how it was trained. `load_pair()` checks every hash before it builds a model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from speclab.model import GPT, GPTConfig

__all__ = ["WEIGHTS_DIR", "RETRAIN_COMMAND", "CheckpointError", "load_pair", "load_model", "save_model", "file_sha256", "default_dtype"]

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


def _retrain_hint(directory: Path) -> str:
    where = "" if directory == WEIGHTS_DIR else f" --out {directory}"
    return f"Retrain the pair with `{RETRAIN_COMMAND}{where}` (under an hour on a 2-core CPU; see speclab/MODEL_CARD.md)."


def _read_manifest(directory: Path) -> dict:
    path = directory / "manifest.json"
    if not path.is_file():
        raise CheckpointError(f"checkpoint manifest {path} is missing. {_retrain_hint(directory)}")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint manifest {path} is not valid JSON ({err}). {_retrain_hint(directory)}") from err


def load_model(
    name: str,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    directory: Path | str | None = None,
) -> GPT:
    """One checkpoint ("target" or "draft"), sha256-verified, in eval mode, on device in dtype."""
    directory = WEIGHTS_DIR if directory is None else Path(directory)
    device = torch.device(device)
    dtype = default_dtype(device) if dtype is None else dtype
    manifest = _read_manifest(directory)
    if name not in manifest:
        raise CheckpointError(f"the manifest in {directory} has no entry {name!r}. {_retrain_hint(directory)}")
    entry = manifest[name]
    path = directory / entry["file"]
    if not path.is_file():
        raise CheckpointError(f"checkpoint file {path} is missing. {_retrain_hint(directory)}")
    digest = file_sha256(path)
    if digest != entry["sha256"]:
        raise CheckpointError(
            f"checkpoint file {path} is corrupted: its sha256 is {digest}, the manifest expects {entry['sha256']}. "
            f"{_retrain_hint(directory)}"
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
) -> tuple[GPT, GPT]:
    """(target, draft): the shipped models, checksum-verified, in eval mode.

    dtype defaults to fp32 on CPU and bf16 (or fp16) on CUDA. Both models read the same
    256-byte vocabulary, so p and q are distributions over the same tokens.
    """
    target = load_model("target", device, dtype, directory)
    draft = load_model("draft", device, dtype, directory)
    if target.cfg.vocab_size != draft.cfg.vocab_size:
        raise CheckpointError("target and draft checkpoints have different vocabularies")
    return target, draft
