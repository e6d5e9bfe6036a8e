"""Which presets to measure, and which to refuse, for the node's topology.

Presets are the profile schema's own (`specserve.profile.nccl`: the preset type, the topologies
and the validator, stdlib-only, so they import inside the SGLang image) or come from a JSON file
written by `--dump-presets` or by hand. `default` (no NCCL variable at all) is always measured
first: every other preset is reported relative to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from specserve.profile.issues import Severity
from specserve.profile.nccl import PRESETS, TOPOLOGIES, NcclPreset, Topology, validate_nccl_env

REFERENCE = "default"


class PresetError(ValueError):
    """A preset request or presets file that cannot be used; the message says how to fix it."""


def builtin_presets() -> dict[str, NcclPreset]:
    """The profile schema's presets, each with its own copy of its environment."""
    return {name: replace(p, env=dict(p.env)) for name, p in PRESETS.items()}


def presets_document(presets: Mapping[str, NcclPreset]) -> dict[str, Any]:
    """The --presets-json format (what --dump-presets writes)."""
    return {"presets": [asdict(p) for p in presets.values()]}


def _preset_from_json(item: object, where: str) -> NcclPreset:
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
    return NcclPreset(name, description, cast(Topology, topology), dict(env))


def load_presets_json(path: Path) -> dict[str, NcclPreset]:
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
    presets: dict[str, NcclPreset] = {}
    for index, item in enumerate(items):
        preset = _preset_from_json(item, f"{path}: presets[{index}]")
        if preset.name in presets:
            raise PresetError(f"{path}: preset {preset.name!r} is defined twice")
        presets[preset.name] = preset
    return presets


@dataclass
class Selection:
    run: list[NcclPreset]
    refused: list[tuple[NcclPreset, list[str]]] = field(default_factory=list)
    skipped: list[tuple[NcclPreset, str]] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)


def _validate(preset: NcclPreset, topology: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) from the profile schema's validator, rendered as messages."""
    issues = validate_nccl_env(preset.env, topology, field_prefix=f"presets.{preset.name}")
    errors = [i.render() for i in issues if i.severity is Severity.ERROR]
    warnings = [i.render() for i in issues if i.severity is Severity.WARNING]
    return errors, warnings


def select_presets(
    available: Mapping[str, NcclPreset],
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
    reference = available.get(REFERENCE, PRESETS[REFERENCE])
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
