"""Read what the checks need from a Hugging Face model directory (config.json, safetensors index).

Multimodal wrappers such as Kimi-K2.5 (`KimiK25ForConditionalGeneration`) nest the language
model's shape under `text_config`; the text view below flattens that so every check reads
`hidden_size` / `num_hidden_layers` / `vocab_size` the same way.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserve.profile.bounded import MAX_MODEL_JSON_BYTES, InputError, read_capped

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
    """A model directory exists but its config cannot be read. `fix`, when set, replaces the
    caller's generic fix (a symlink loop is not fixed by downloading again)."""

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


LOOP_FIX = "point the link at the real file or directory (ls -l shows where it leads)"


def is_symlink_loop(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _read_json(path: Path) -> Any:
    """JSON from a regular file of bounded size: a FIFO, /dev/zero or a loop is an error."""
    try:
        data = read_capped(path, MAX_MODEL_JSON_BYTES, "the model's JSON")
    except InputError as exc:
        if "no such file" in exc.problem:
            raise FileNotFoundError(path) from None
        fix = LOOP_FIX if "symlink loop" in exc.problem else None
        raise ModelDirError(exc.problem, fix) from None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ModelDirError(f"{path} is not readable JSON: {exc}") from None


def read_model_config(directory: Path) -> ModelConfig:
    if is_symlink_loop(directory):
        raise ModelDirError(f"{directory} is a symlink loop", LOOP_FIX)
    path = directory / "config.json"
    try:
        raw = _read_json(path)
    except FileNotFoundError as exc:
        raise ModelDirError(f"{path} does not exist") from exc
    if not isinstance(raw, dict):
        raise ModelDirError(f"{path} is not a JSON object")
    text = raw.get("text_config")
    text_view = {**raw, **text} if isinstance(text, dict) else dict(raw)
    return ModelConfig(directory=directory, raw=raw, text=text_view)


def read_index(directory: Path) -> dict[str, Any] | None:
    path = directory / INDEX_NAME
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = _read_json(path)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("weight_map"), dict):
        raise ModelDirError(f"{path} has no weight_map object")
    return data


def locate_model_dir(path: str, weights_root: Path | None) -> Path | None:
    """The local directory holding `path`'s files, or None when it is not on this machine.

    A profile names models the way SGLang will (a local path on the node, or a hub id);
    `weights_root` lets `check` find the same model under another root, e.g. fixtures.
    """
    candidate = Path(path)
    if candidate.is_dir() or is_symlink_loop(candidate):
        return candidate  # a loop is "there": read_model_config names it instead of skipping
    if weights_root is not None:
        for tail in (Path(path.rstrip("/")).name, path.strip("/")):
            found = weights_root / tail
            if tail and (found.is_dir() or is_symlink_loop(found)):
                return found
    return None
