"""Stable, readable YAML for committed artefacts: key order kept, multi-line strings as blocks."""

from __future__ import annotations

from typing import Any

import yaml


class _BlockDumper(yaml.SafeDumper):
    """SafeDumper that writes multi-line strings as `|` blocks (PromQL stays readable in diffs)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_BlockDumper.add_representer(str, _str_representer)


def dump_yaml(data: Any, header: str = "") -> str:
    body = yaml.dump(
        data,
        Dumper=_BlockDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    if header:
        prefix = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
        return prefix + body
    return body
