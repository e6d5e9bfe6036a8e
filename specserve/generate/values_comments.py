"""values.yaml's `# --` comments, from values.schema.json: a value's meaning has one home.

A value's description is written once, in the schema (Helm and editors show it; the chart
README's table is generated from it, specserve/generate/chart_values.py). values.yaml keeps its
inline documentation for the reader of the file: each `# --` comment block above a key is
rewritten from that key's schema description (through `$ref`, a use site's own description
winning), so the two can no longer say different things. A `# --` block over a key the schema
does not describe fails generation, naming it.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from specserve.docblocks import BlockError, ReadSource
from specserve.generate.chart_values import SCHEMA, VALUES, resolve

MARK = "# -- "
WIDTH = 100
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):")


def describe(schema: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """The schema's description of the value at `path`, None where it has none."""
    defs = schema.get("$defs", {})
    node: Mapping[str, Any] = schema
    for key in path:
        node = resolve(node, defs)
        properties = node.get("properties", {})
        if key in properties:
            node = properties[key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    text = resolve(node, defs).get("description")
    return str(text).strip() if text else None


def _comment(indent: str, text: str) -> list[str]:
    lines = textwrap.wrap(" ".join(text.split()), WIDTH - len(indent) - len(MARK),
                          break_on_hyphens=False)
    return [f"{indent}{MARK}{lines[0]}", *(f"{indent}# {line}" for line in lines[1:])]


def _blocks(lines: list[str]) -> Iterator[tuple[int, int, str, tuple[str, ...]]]:
    """(first, end, indent, key path) of every `# --` block directly above a key line."""
    stack: list[tuple[int, str]] = []
    start: int | None = None
    for number, line in enumerate(lines):
        stripped = line.lstrip(" ")
        if stripped.startswith(MARK.rstrip()):
            start = number if start is None else start
            continue
        if stripped.startswith("#") and start is not None:
            continue  # a continuation line of the block
        match = _KEY.match(line)
        if match:
            width = len(match["indent"])
            stack = [(w, k) for w, k in stack if w < width] + [(width, match["key"])]
            if start is not None:
                yield start, number, match["indent"], tuple(k for _, k in stack)
        start = None


def comments(values: str, schema: Mapping[str, Any]) -> str:
    lines = values.splitlines()
    out: list[str] = []
    done = 0
    for first, end, indent, path in _blocks(lines):
        text = describe(schema, path)
        if text is None:
            raise BlockError(f"{VALUES}: the `# --` comment above {'.'.join(path)} has no "
                             f"description in {SCHEMA} to come from: write it there")
        out += lines[done:first] + _comment(indent, text)
        done = end
    return "\n".join(out + lines[done:]) + "\n"


def files(read: ReadSource) -> Mapping[str, Callable[[], str]]:
    return {VALUES: lambda: comments(read(VALUES), json.loads(read(SCHEMA)))}
