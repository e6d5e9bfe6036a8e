"""Every place a pinned version or image is written, and the rewrite that keeps each one equal to
its source: versions.yaml (or pyproject.toml's project.version, the bundle's own version; or
specserve/logpath.py, the SGLang log path every image and deploy path shares).

`PINS` is the one table. `specserve generate` rewrites each entry's value in place: the default of
every `ARG NAME=...` line of a Dockerfile, or the scalar at a dotted key of a YAML file (found by
indentation), so the comments and layout around it stay hand-written. Changing a version is one
edit of versions.yaml and one `specserve generate`; `--check` fails while any entry differs.

A pin names a versions.yaml key: an image's mapping (`upstream_images.prometheus`) reads as
`repository:tag`, anything else as the scalar it holds.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

VERSIONS = "versions.yaml"
PYPROJECT = "pyproject.toml"
LOGPATH = "specserve/logpath.py"
CHART = "charts/specserve"

ReadSource = Callable[[str], str]
# libyaml's loader where PyYAML has it: the docs' tables read the role files through these
# generators, so each is produced many times a run.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class PinError(Exception):
    """A file lost the line a pin is written on, or a rewrite would change more than the pin."""


@dataclass(frozen=True)
class Pin:
    path: str  # the file, relative to the repository root
    key: str  # a Dockerfile's ARG name, or a YAML file's dotted key
    source: str  # the dotted key in `origin`
    origin: str = VERSIONS

    @property
    def dockerfile(self) -> bool:
        return self.path.endswith("Dockerfile")


def _project(path: str, key: str) -> Pin:
    return Pin(path, key, "project.version", PYPROJECT)


def _role(role: str, variable: str, source: str, origin: str = VERSIONS) -> tuple[Pin, Pin]:
    """A role's default, and the same default in its argument spec (ansible-core validates the
    spec's copy; docs/ansible.md's tables read it)."""
    return (
        Pin(f"ansible/roles/{role}/defaults/main.yml", variable, source, origin),
        Pin(f"ansible/roles/{role}/meta/argument_specs.yml",
            f"argument_specs.main.options.{variable}.default", source, origin),
    )  # fmt: skip


def _image(path: str, key: str, source: str) -> tuple[Pin, Pin]:
    """A chart image's repository and tag, as two values (the chart joins them, with a digest)."""
    return (Pin(path, f"{key}.repository", f"{source}.repository"),
            Pin(path, f"{key}.tag", f"{source}.tag"))  # fmt: skip


# fmt: off
PINS: tuple[Pin, ...] = (
    # Images: what each builds FROM, the bundle's version it installs, the version it declares.
    Pin("docker/sglang/Dockerfile", "BASE_IMAGE", "upstream_images.sglang"),
    _project("docker/sglang/Dockerfile", "SPECSERVE_VERSION"),
    Pin("docker/sglang/Dockerfile", "SGLANG_VERSION", "sglang.pinned"),
    Pin("docker/sglang-local-base/Dockerfile", "BASE_IMAGE", "upstream_images.local_base"),
    Pin("docker/sglang-local-base/Dockerfile", "SGLANG_VERSION", "sglang.pinned"),
    Pin("docker/exporter/Dockerfile", "BASE_IMAGE", "upstream_images.python"),
    _project("docker/exporter/Dockerfile", "SPECSERVE_VERSION"),
    Pin("docker/standin/Dockerfile", "BASE_IMAGE", "upstream_images.python"),
    _project("docker/standin/Dockerfile", "SPECSERVE_VERSION"),
    Pin("docker/router/Dockerfile", "BASE_IMAGE", "upstream_images.python"),
    Pin("docker/router/Dockerfile", "SMG_VERSION", "tools.smg"),
    # Ansible: each role's default and its argument spec's.
    *_role("specserve", "specserve_image", "specserve_images.sglang"),
    *_role("specserve", "specserve_exporter_image", "specserve_images.exporter"),
    *_role("router", "router_image", "specserve_images.router"),
    *_role("monitoring", "monitoring_prometheus_image", "upstream_images.prometheus"),
    *_role("monitoring", "monitoring_alertmanager_image", "upstream_images.alertmanager"),
    *_role("monitoring", "monitoring_grafana_image", "upstream_images.grafana"),
    *_role("dcgm_exporter", "dcgm_exporter_image", "upstream_images.dcgm_exporter"),
    *_role("weights", "weights_hf_hub_version", "tools.huggingface_hub"),
    *_role("weights", "weights_hf_click_version", "tools.click"),
    # The example inventories set the image their hosts run.
    Pin("playbooks/inventory/gpu/group_vars/specserve/main.yml", "specserve_image",
        "specserve_images.sglang"),
    Pin("playbooks/inventory/standin/hosts.yml", "specserve_demo.vars.specserve_image",
        "specserve_images.standin"),
    Pin("playbooks/inventory/fleet/hosts.yml", "specserve_fleet_demo.vars.specserve_image",
        "specserve_images.standin"),
    # The SGLang log directory, shared by the server (read-write) and the exporter (read-only):
    # the images create it, Ansible mounts the host directory of the same path.
    Pin("docker/sglang/Dockerfile", "SPECSERVE_LOG_DIR", "LOG_DIR", LOGPATH),
    Pin("docker/standin/Dockerfile", "SPECSERVE_LOG_DIR", "LOG_DIR", LOGPATH),
    *_role("specserve", "specserve_log_dir", "LOG_DIR", LOGPATH),
    # The chart: its images, and its version (one product, one version: the labels carry it).
    *_image(f"{CHART}/values.yaml", "image", "specserve_images.sglang"),
    *_image(f"{CHART}/values.yaml", "exporterImage", "specserve_images.exporter"),
    *_image(f"{CHART}/values.yaml", "router.image", "upstream_images.smg"),
    *_image(f"{CHART}/values.yaml", "dcgmExporter.image", "upstream_images.dcgm_exporter"),
    _project(f"{CHART}/Chart.yaml", "version"),
    _project(f"{CHART}/Chart.yaml", "appVersion"),
)
# fmt: on


def _lookup(document: Any, dotted: str, where: str) -> Any:
    node = document
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            raise PinError(f"{where} has no {dotted!r}")
        node = node[key]
    return node


def _load(origin: str, read: ReadSource) -> Any:
    text = read(origin)
    if origin.endswith(".py"):
        # specserve/logpath.py imports nothing by design (the exporter imports it): its constants
        # are the module's own statements, run as written.
        namespace: dict[str, Any] = {}
        exec(compile(text, origin, "exec"), namespace)
        return {k: v for k, v in namespace.items() if k.isupper()}
    return tomllib.loads(text) if origin.endswith(".toml") else _yaml(text)


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)  # a safe loader: CSafeLoader or SafeLoader


def value(pin: Pin, read: ReadSource) -> str:
    """The value `pin` must hold, from its source."""
    return _value(pin, _load(pin.origin, read))


def _value(pin: Pin, origin: Any) -> str:
    found = _lookup(origin, pin.source, pin.origin)
    if isinstance(found, Mapping) and {"repository", "tag"} <= found.keys():
        return f"{found['repository']}:{found['tag']}"
    if isinstance(found, Mapping | list) or found is None:
        raise PinError(f"{pin.origin} {pin.source!r} is not a version or an image")
    return str(found)


# --- Dockerfiles: every `ARG NAME=default` line (one per stage that declares it) -----------------


def _arg_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"^(ARG {name}=)(\S+)$", re.MULTILINE)


def _write_arg(text: str, pin: Pin, new: str) -> str:
    pattern = _arg_pattern(pin.key)
    if not pattern.search(text):
        raise PinError(f"{pin.path} has no 'ARG {pin.key}=...' line; put the default back")
    return pattern.sub(lambda m: m.group(1) + new, text)


# --- YAML: the scalar at a dotted key, found by indentation --------------------------------------

_KEY = re.compile(r"^(?P<indent> *)(?P<item>- +)?(?P<key>[A-Za-z_][\w.-]*):(?P<rest>.*)$")
# A one-line scalar after the key's colon: quoted, or plain up to a comment.
_SCALAR = re.compile(
    r"""^(?P<space> +)(?P<value>"[^"]*"|'[^']*'|[^\s#'"][^#]*?)(?P<tail> *(#.*)?)$"""
)


def _key_lines(lines: list[str]) -> Iterable[tuple[int, tuple[str, ...], str]]:
    """(line index, dotted path, the text after the colon) of every mapping key outside block
    scalars; a key inside a sequence item gets a `-` in its path, so no pin matches it."""
    stack: list[tuple[int, str]] = []
    block_indent: int | None = None
    for index, line in enumerate(lines):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if block_indent is not None:
            if not stripped or indent > block_indent:
                continue
            block_indent = None
        match = _KEY.match(line)
        if not stripped or stripped.startswith("#") or not match:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if match["item"]:
            stack.append((indent, "-"))
            indent += len(match["item"])
        path = (*(key for _, key in stack), match["key"])
        yield index, path, match["rest"]
        stack.append((indent, match["key"]))
        if match["rest"].strip().startswith(("|", ">")):
            block_indent = indent


def _scalar(new: str, old: str) -> str:
    """`new` written as YAML that reads back as that string, quoted as `old` was when it was."""
    if old.startswith("'"):
        return "'" + new.replace("'", "''") + "'"
    plain_ok = not old.startswith('"') and re.fullmatch(r"[\w./:@+-]+", new) is not None
    return new if plain_ok and yaml.safe_load(new) == new else json.dumps(new)


def _write_yaml(text: str, pin: Pin, new: str) -> str:
    lines = text.split("\n")
    target = tuple(pin.key.split("."))
    hits = [(index, rest) for index, path, rest in _key_lines(lines) if path == target]
    scalar = _SCALAR.match(hits[0][1]) if len(hits) == 1 else None
    if scalar is None:
        raise PinError(f"{pin.path} has no one-line value at {pin.key!r} to write {new!r} into; "
                       "put the key back on one line")  # fmt: skip
    index, rest = hits[0]
    start = len(lines[index]) - len(rest) + scalar.start("value")
    old = scalar["value"]
    lines[index] = lines[index][:start] + _scalar(new, old) + scalar["tail"]
    return "\n".join(lines)


def _check_only_pins_changed(before: str, after: str, written: Mapping[Pin, str]) -> None:
    """A YAML file's rewrite changed its pins' values and nothing else: the line-level edit
    must never misread the document's structure."""
    path = next(iter(written)).path
    expected = _yaml(before)
    try:
        got = _yaml(after)
    except yaml.YAMLError:
        got = None
    for pin, new in written.items():
        *parents, last = pin.key.split(".")
        parent = _lookup(expected, ".".join(parents), path) if parents else expected
        if not isinstance(parent, dict) or last not in parent:
            raise PinError(f"{path} has no {pin.key!r}")
        parent[last] = new
    if got != expected:
        raise PinError(f"{path}: writing its pins would change more than their values; "
                       "specserve/generate/pins.py cannot rewrite this layout")  # fmt: skip


def held(text: str, pin: Pin) -> set[str]:
    """The values `pin`'s file holds where the pin is written (every ARG line of a Dockerfile)."""
    if pin.dockerfile:
        return {match[2] for match in _arg_pattern(pin.key).finditer(text)}
    return {str(_lookup(_yaml(text), pin.key, pin.path))}


def rewrite(text: str, values: Mapping[Pin, str]) -> str:
    """`text` (one file) with each pin of `values` set to its value, everything else as it was."""
    written = text
    for pin, new in values.items():
        write = _write_arg if pin.dockerfile else _write_yaml
        written = write(written, pin, new)
    if not all(pin.dockerfile for pin in values):
        _check_only_pins_changed(text, written, values)
    return written


def files(read: ReadSource) -> Mapping[str, Callable[[], str]]:
    """Every file PINS writes into: its text (read through `read`, so a file another generator
    produces, as the chart's values.yaml, is that generator's output) with each pin rewritten."""
    by_path: dict[str, list[Pin]] = {}
    for pin in PINS:
        by_path.setdefault(pin.path, []).append(pin)

    # One registry is one state of the tree: each source and file is read and produced once,
    # however many other generators read it.
    @functools.cache
    def origin(name: str) -> Any:
        return _load(name, read)

    @functools.cache
    def produce(path: str) -> str:
        return rewrite(read(path), {pin: _value(pin, origin(pin.origin)) for pin in by_path[path]})

    return {path: (lambda path=path: produce(path)) for path in by_path}
