"""Every SGLang argv the product can render, by source, for tests/contract/test_rendered_argv.py.

Sources (each yields the flags only: the launch command, SGLang's or the stand-in's, is dropped,
and the API key placeholder becomes a dummy value):
- `profile:<file>`: every shipped profile (profiles/*.yaml);
- `chart:<file>`: the effective profile of every chart CI values file, built the way the chart's
  `specserve.profileYaml` helper (charts/specserve/templates/_helpers.tpl) builds it;
- `tune:<profile>:<point>`: every point of the default tuning grid (ansible/roles/tune/defaults)
  that the product would run (`specserve tune plan`'s own expansion and validity), on every
  shipped profile with a drafter;
- `baseline:<profile>`: the baseline playbook's no-drafter variant (specserve_profile_edit('off'));
- `docs:<file>:<line>`: every `python3 -m sglang.launch_server` command in README.md / docs/.
"""

from __future__ import annotations

import copy
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specserve.profile.loader import load_profile
from specserve.profile.nodes import Placement
from specserve.profile.render import render_argv
from specserve.tune.edit import profile_edit
from specserve.tune.plan import tune_points

ROOT = Path(__file__).resolve().parents[2]
DUMMY_API_KEY = "contract-suite-dummy-key"
# The rank 0 address a deploy passes when a profile leaves it open (Helm: $(LWS_LEADER_ADDRESS)).
LEADER = "specserve-0.specserve.inference.svc.cluster.local"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Source:
    name: str
    argv: Callable[[str], list[str]]  # SGLang version -> the flags the product renders


def _render_document(doc: dict[str, Any], version: str, where: str) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{Path(where).stem}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return _render_file(path, version)


def _render_file(path: Path, version: str) -> list[str]:
    profile = load_profile(path)
    # A multi-node profile renders rank 0, at the leader address a deploy passes where the
    # profile leaves it open (tests/contract/test_multinode_argv.py renders every rank).
    placement = Placement(0, None if profile.nodes.rendezvous_host else LEADER)
    argv = render_argv(profile, sglang_version=version, placement=placement)
    launch = list(profile.server.launch_command)
    assert argv[: len(launch)] == launch, f"{path}: argv does not start with the launch command"
    flags = argv[len(launch) :]
    if "--api-key" in flags:
        flags[flags.index("--api-key") + 1] = DUMMY_API_KEY
    return flags


def _profiles() -> list[Path]:
    return sorted((ROOT / "profiles").glob("*.yaml"))


def _has_drafter(path: Path) -> bool:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    drafter = doc.get("drafter") if isinstance(doc, dict) else None
    return isinstance(drafter, dict) and drafter.get("algorithm") not in (None, "none")


def chart_profile(values_path: Path) -> dict[str, Any]:
    """The chart's effective profile for a values file (mirrors specserve.profileYaml)."""
    chart = ROOT / "charts" / "specserve"
    defaults = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8")) or {}
    values = yaml.safe_load(values_path.read_text(encoding="utf-8")) or {}
    profile = copy.deepcopy(values.get("profile") or defaults.get("profile") or {})
    if not profile:
        default = chart / "files" / "profiles" / "default.yaml"
        profile = yaml.safe_load(default.read_text(encoding="utf-8"))
    overrides = values.get("profileOverrides") or defaults.get("profileOverrides") or {}
    _merge(profile, copy.deepcopy(overrides))
    server = profile.setdefault("server", {}) or {}
    if str(server.get("host") or "127.0.0.1") in LOOPBACK:
        server["host"] = "0.0.0.0"
    profile["server"] = server
    return profile


def _merge(base: dict[str, Any], over: dict[str, Any]) -> None:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def default_grid() -> dict[str, Any]:
    defaults = ROOT / "ansible" / "roles" / "tune" / "defaults" / "main.yml"
    grid: dict[str, Any] = yaml.safe_load(defaults.read_text(encoding="utf-8"))["tune_grid"]
    return grid


def _tune_sources() -> list[Source]:
    sources = []
    for path in filter(_has_drafter, _profiles()):
        for point in tune_points(default_grid(), str(path)):
            if not point["valid"]:
                continue  # the tune role reports it as invalid and never renders it

            def argv(version: str, path: Path = path, point: dict[str, Any] = point) -> list[str]:
                text = profile_edit(path.read_text(encoding="utf-8"), speculative=point)
                return _render_document(yaml.safe_load(text), version, path.name)

            sources.append(Source(f"tune:{path.name}:{point['id']}", argv))
    return sources


def _baseline_sources() -> list[Source]:
    sources = []
    for path in filter(_has_drafter, _profiles()):

        def argv(version: str, path: Path = path) -> list[str]:
            text = profile_edit(path.read_text(encoding="utf-8"), "off")
            return _render_document(yaml.safe_load(text), version, path.name)

        sources.append(Source(f"baseline:{path.name}", argv))
    return sources


FENCE = re.compile(r"^(```|~~~)")
LAUNCH = re.compile(r"-m\s+sglang\.launch_server\b")


def docs_commands() -> list[tuple[str, list[str]]]:
    """(file:line, flags) of every sglang.launch_server command in a README/docs code block."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        lines = path.read_text(encoding="utf-8").splitlines()
        in_block = False
        for number, line in enumerate(lines):
            if FENCE.match(line.strip()):
                in_block = not in_block
                continue
            if not in_block or not LAUNCH.search(line):
                continue
            command = line
            follow = number
            while command.rstrip().endswith("\\") and follow + 1 < len(lines):
                follow += 1
                command = command.rstrip()[:-1] + " " + lines[follow]
            tokens = shlex.split(command.split("sglang.launch_server", 1)[1])
            rel = path.relative_to(ROOT).as_posix()
            found.append((f"{rel}:{number + 1}", tokens))
    return found


def all_sources() -> list[Source]:
    sources = [Source(f"profile:{p.name}", lambda v, p=p: _render_file(p, v)) for p in _profiles()]
    for values in sorted((ROOT / "charts" / "specserve" / "ci").glob("*.yaml")):
        sources.append(
            Source(
                f"chart:{values.name}",
                lambda v, values=values: _render_document(chart_profile(values), v, values.name),
            )
        )
    sources += _tune_sources()
    sources += _baseline_sources()
    for where, tokens in docs_commands():
        sources.append(Source(f"docs:{where}", lambda v, tokens=tokens: list(tokens)))
    return sources
