"""Locate and read the target / drafter model directories once for all checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specserve.profile.hfconfig import ModelConfig, ModelDirError, locate_model_dir
from specserve.profile.hfconfig import read_model_config as _read
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile


@dataclass(frozen=True)
class CheckOptions:
    weights_root: Path | None = None
    # Fixture dirs and pre-download checks have configs but no shards.
    configs_only: bool = False
    # `check` on the node must see the models; elsewhere a missing dir is only a warning.
    require_models: bool = False
    # The SGLang version checked against (None: resolve_version(): the image's env, else pinned).
    sglang_version: str | None = None
    # `specserve check` compares a speculative profile with its baseline's recorded settings
    # (checks/baseline.py); the launcher and tuning points are not judged on their threshold.
    compare_baseline: bool = False
    # The server image the deploy runs (compared with baseline.image when given).
    image: str | None = None


@dataclass
class ModelContext:
    target: ModelConfig | None = None
    drafter: ModelConfig | None = None
    target_dir: Path | None = None
    drafter_dir: Path | None = None
    issues: list[Issue] = field(default_factory=list)


def _load(
    field_name: str, path: str, options: CheckOptions, ctx: ModelContext
) -> tuple[Path | None, ModelConfig | None]:
    directory = locate_model_dir(path, options.weights_root)
    if directory is None:
        make = error if options.require_models else warning
        hint = f" or under --weights-root {options.weights_root}" if options.weights_root else ""
        ctx.issues.append(
            make(
                field_name,
                f"model directory {path!r} is not on this machine{hint}; the model-config "
                "checks (EAGLE3 architecture, aux layers, hidden size, vocab) were skipped",
                "run check where the weights are, or pass --weights-root DIR holding a copy "
                "of the model directory (config.json is enough with --configs-only)",
            )
        )
        return None, None
    try:
        return directory, _read(directory)
    except ModelDirError as exc:
        ctx.issues.append(
            error(
                field_name,
                str(exc),
                exc.fix or "download the model's config.json into the directory",
            )
        )
        return directory, None


def build_context(profile: Profile, options: CheckOptions) -> ModelContext:
    ctx = ModelContext()
    ctx.target_dir, ctx.target = _load("target.path", profile.target.path, options, ctx)
    spec = profile.speculative
    if spec is not None and spec.path:
        ctx.drafter_dir, ctx.drafter = _load("drafter.path", spec.path, options, ctx)
    if spec is not None and spec.algorithm == "UNO" and spec.uno_lora_path:
        ctx.issues += _lora_issues(spec.uno_lora_path, options)
    return ctx


# SGLang loads UNO's adapter with its LoRAManager, which opens this file first
# (srt/lora/lora_config.py::get_lora_config, 0.5.21 and 0.5.23).
LORA_CONFIG = "adapter_config.json"


def _lora_issues(path: str, options: CheckOptions) -> list[Issue]:
    directory = locate_model_dir(path, options.weights_root)
    if directory is None:
        make = error if options.require_models else warning
        return [make(
            "drafter.uno_lora_path",
            f"UNO LoRA directory {path!r} is not on this machine; its {LORA_CONFIG} was not "
            "checked",
            "run check where the adapter is, or pass --weights-root DIR holding a copy",
        )]  # fmt: skip
    if not (directory / LORA_CONFIG).is_file():
        return [error(
            "drafter.uno_lora_path",
            f"{directory} has no {LORA_CONFIG}: SGLang's LoRA loader opens it first, so the "
            "UNO worker would fail at load",
            "point drafter.uno_lora_path at the adapter's directory (the one holding "
            f"{LORA_CONFIG} and its weights)",
        )]  # fmt: skip
    return []
