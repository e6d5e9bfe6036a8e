"""Which presets to measure, and which to refuse, for the node's topology.

Presets come from the profile schema (`specserve.profile.nccl`, stdlib-only, so it imports inside
the SGLang image) or from a JSON file written by `--dump-presets` or by hand. `default` (no NCCL
variable at all) is always measured first: every other preset is reported relative to it.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import specserve

REFERENCE = "default"
TOPOLOGIES: tuple[str, ...] = ("pcie", "nvlink", "any")


class PresetError(ValueError):
    """A preset request or presets file that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class BenchPreset:
    name: str
    description: str
    topology: str
    env: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


REFERENCE_PRESET = BenchPreset(
    REFERENCE, "NCCL's own defaults: no NCCL_* variable is set", "any", {}
)


def _profile_nccl() -> ModuleType:
    """specserve.profile.nccl, even where the profile package's own imports are missing.

    `specserve/profile/__init__.py` loads the YAML profile machinery (PyYAML, jsonschema), which
    the SGLang image lacks; the nccl and issues modules themselves are stdlib-only. If the
    package import fails, register a bare package object for `specserve.profile` (the directory
    only, without running its __init__) so those two modules import on their own.
    """
    try:
        return importlib.import_module("specserve.profile.nccl")
    except ImportError as exc:
        if (exc.name or "").startswith("specserve.profile"):
            raise  # the module itself is missing: nothing to work around
        blocked_by = exc.name or str(exc)
    package_dir = Path(specserve.__file__).resolve().parent / "profile"
    bare = ModuleType("specserve.profile")
    bare.__path__ = [str(package_dir)]
    bare.__doc__ = f"bare package: the real __init__ needs {blocked_by}, absent here"
    sys.modules["specserve.profile"] = bare
    return importlib.import_module("specserve.profile.nccl")


def builtin_presets() -> dict[str, BenchPreset]:
    return {
        name: BenchPreset(p.name, p.description, str(p.topology), dict(p.env))
        for name, p in _profile_nccl().PRESETS.items()
    }


def presets_document(presets: Mapping[str, BenchPreset]) -> dict[str, Any]:
    """The --presets-json format (what --dump-presets writes)."""
    return {"presets": [p.as_dict() for p in presets.values()]}


def _preset_from_json(item: object, where: str) -> BenchPreset:
    if not isinstance(item, dict):
        raise PresetError(f"{where}: expected an object with name, topology, env")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise PresetError(f"{where}.name: missing or not a string; give each preset a name")
    topology = item.get("topology", "any")
    if topology not in TOPOLOGIES:
        raise PresetError(f"{where}.topology: {topology!r} is not one of {', '.join(TOPOLOGIES)}")
    env = item.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise PresetError(
            f"{where}.env: must map variable names to string values, e.g. "
            '{"NCCL_PROTO": "LL"} (quote numbers)'
        )
    description = item.get("description", "")
    if not isinstance(description, str):
        raise PresetError(f"{where}.description: must be a string")
    return BenchPreset(name, description, topology, dict(env))


def load_presets_json(path: Path) -> dict[str, BenchPreset]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PresetError(f"--presets-json {path}: cannot read it: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise PresetError(f"--presets-json {path}: not valid JSON: {exc}") from exc
    items = document.get("presets") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise PresetError(
            f'--presets-json {path}: expected {{"presets": [{{"name": ..., "env": {{...}}}}]}}'
        )
    presets: dict[str, BenchPreset] = {}
    for index, item in enumerate(items):
        preset = _preset_from_json(item, f"{path}: presets[{index}]")
        if preset.name in presets:
            raise PresetError(f"{path}: preset {preset.name!r} is defined twice")
        presets[preset.name] = preset
    return presets


@dataclass
class Selection:
    run: list[BenchPreset]
    refused: list[tuple[BenchPreset, list[str]]] = field(default_factory=list)
    skipped: list[tuple[BenchPreset, str]] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)


def _validate(preset: BenchPreset, topology: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) from the profile schema's validator, rendered as messages."""
    profile_nccl = _profile_nccl()
    from specserve.profile.issues import Severity

    issues = profile_nccl.validate_nccl_env(
        preset.env, topology, field_prefix=f"presets.{preset.name}"
    )
    errors = [i.render() for i in issues if i.severity is Severity.ERROR]
    warnings = [i.render() for i in issues if i.severity is Severity.WARNING]
    return errors, warnings


def select_presets(
    available: Mapping[str, BenchPreset],
    requested: list[str] | None,
    topology: str,
    force: bool = False,
) -> Selection:
    """Pick the presets to run for a node of `topology` (pcie|nvlink|any).

    With no request, every preset meant for this topology (or for any) runs. A named preset that
    the validator rejects for this topology (e.g. LL128 forced on PCIe) is refused, unless
    `force`, in which case it runs with the validator's messages attached to its result.
    """
    if topology not in TOPOLOGIES:
        raise PresetError(f"topology {topology!r} is not one of {', '.join(TOPOLOGIES)}")
    reference = available.get(REFERENCE, REFERENCE_PRESET)
    if reference.env:
        raise PresetError(
            f"preset {REFERENCE!r} must set no variables (it is the NCCL-defaults reference), "
            f"but sets {', '.join(sorted(reference.env))}; rename that preset"
        )
    pool = {REFERENCE: reference, **{n: p for n, p in available.items() if n != REFERENCE}}
    selection = Selection(run=[])
    if requested:
        unknown = [n for n in requested if n not in pool]
        if unknown:
            raise PresetError(
                f"--presets: unknown preset(s) {', '.join(unknown)}; available: {', '.join(pool)}"
            )
        wanted = [REFERENCE, *dict.fromkeys(n for n in requested if n != REFERENCE)]
    else:
        wanted = []
        for name, preset in pool.items():
            if topology == "any" or preset.topology in ("any", topology):
                wanted.append(name)
            else:
                why = f"meant for {preset.topology} nodes; this node is {topology}"
                selection.skipped.append((preset, f"{why} (name it in --presets to run it)"))
    for name in wanted:
        preset = pool[name]
        errors, warnings = _validate(preset, topology)
        notes = list(warnings)
        if preset.topology not in ("any", topology) and topology != "any":
            notes.append(
                f"presets.{name}: meant for {preset.topology} nodes, measured on a {topology} node"
            )
        if errors and not force:
            selection.refused.append((preset, errors))
            continue
        if errors:
            notes += [f"forced despite: {message}" for message in errors]
        selection.run.append(preset)
        if notes:
            selection.notes[name] = notes
    return selection
