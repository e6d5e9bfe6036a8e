"""Read what the checks need from a Hugging Face model directory (config.json, safetensors index).

Multimodal wrappers such as Kimi-K2.5 (`KimiK25ForConditionalGeneration`) nest the language
model's shape under `text_config`; the text view below flattens that so every check reads
`hidden_size` / `num_hidden_layers` / `vocab_size` the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True)
class ModelConfig:
    directory: Path
    raw: dict[str, Any]
    text: dict[str, Any] = field(default_factory=dict)

    @property
    def architectures(self) -> list[str]:
        archs = self.raw.get("architectures") or []
        return [str(a) for a in archs]

    def int_field(self, name: str) -> int | None:
        value = self.text.get(name, self.raw.get(name))
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class ModelDirError(Exception):
    """A model directory exists but its config cannot be read."""


def read_model_config(directory: Path) -> ModelConfig:
    path = directory / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelDirError(f"{path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise ModelDirError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ModelDirError(f"{path} is not a JSON object")
    text = raw.get("text_config")
    text_view = {**raw, **text} if isinstance(text, dict) else dict(raw)
    return ModelConfig(directory=directory, raw=raw, text=text_view)


def read_index(directory: Path) -> dict[str, Any] | None:
    path = directory / INDEX_NAME
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelDirError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("weight_map"), dict):
        raise ModelDirError(f"{path} has no weight_map object")
    return data


def locate_model_dir(path: str, weights_root: Path | None) -> Path | None:
    """The local directory holding `path`'s files, or None when it is not on this machine.

    A profile names models the way SGLang will (a local path on the node, or a hub id);
    `weights_root` lets `check` find the same model under another root, e.g. fixtures.
    """
    candidate = Path(path)
    if candidate.is_dir():
        return candidate
    if weights_root is not None:
        for tail in (Path(path.rstrip("/")).name, path.strip("/")):
            if tail and (weights_root / tail).is_dir():
                return weights_root / tail
    return None
