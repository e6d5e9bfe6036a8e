"""The chart README's values table, from values.schema.json and values.yaml.

A value's meaning is written once, as its `description` in values.schema.json (which Helm and
editors show too); its default is values.yaml's. Every leaf of the schema is a row: an object
with `properties` is walked into (through `$ref`, a use site's own `properties` adding the
descriptions that differ per use, as `image` for the server, exporter and router images), a map
whose entries have `properties` is walked with `<name>` for the key, and anything else is one row.
A leaf without a description fails generation, naming it. `specserve generate` writes the table
between its markers in charts/specserve/README.md (specserve/docblocks.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specserve.docblocks import Block, BlockError, ReadSource, code, table, value

CHART = "charts/specserve"
SCHEMA = f"{CHART}/values.schema.json"
VALUES = f"{CHART}/values.yaml"
ANY_KEY = "<name>"
_UNSET = object()


@dataclass(frozen=True)
class Row:
    path: str
    schema: Mapping[str, Any]
    default: Any  # values.yaml's value; _UNSET where it sets none, or under ANY_KEY


def resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """`node` with its `$ref` merged in, the use site's own keys (and properties) winning."""
    if "$ref" not in node:
        return dict(node)
    base = resolve(defs[node["$ref"].rsplit("/", 1)[1]], defs)
    merged = {**base, **{k: v for k, v in node.items() if k != "$ref"}}
    if "properties" in node and "properties" in base:
        merged["properties"] = {
            key: {**base["properties"].get(key, {}), **node["properties"].get(key, {})}
            for key in {**base["properties"], **node["properties"]}
        }
    return merged


def rows(schema: Mapping[str, Any], values: Any) -> Iterator[Row]:
    defs = schema.get("$defs", {})

    def walk(node: Mapping[str, Any], path: str, default: Any) -> Iterator[Row]:
        node = resolve(node, defs)
        entries = node.get("additionalProperties")
        if "properties" in node:
            for key, child in node["properties"].items():
                below = default.get(key, _UNSET) if isinstance(default, dict) else _UNSET
                yield from walk(child, f"{path}.{key}" if path else key, below)
        elif isinstance(entries, dict) and "properties" in resolve(entries, defs):
            yield from walk(entries, f"{path}.{ANY_KEY}", _UNSET)
        else:
            yield Row(path, node, default)

    yield from walk(schema, "", values)


def _meaning(row: Row) -> str:
    text = str(row.schema.get("description") or "").strip()
    if not text:
        raise BlockError(f"{SCHEMA}: {row.path} has no description: add one (it is the value's "
                         "documentation, shown in the chart README's table)")  # fmt: skip
    if "enum" in row.schema:
        text += " One of " + ", ".join(code(str(c)) for c in row.schema["enum"]) + "."
    return text


def _default(row: Row) -> str:
    if ANY_KEY in row.path:
        return "per entry (`values.yaml`)"
    return "unset" if row.default is _UNSET else value(row.default)


def values_table(_root: Path, read: ReadSource) -> str:
    schema = json.loads(read(SCHEMA))
    values = yaml.safe_load(read(VALUES))
    cells = ((code(r.path), _default(r), _meaning(r)) for r in rows(schema, values))
    return table(("value", "default", "meaning"), cells)


BLOCKS: tuple[Block, ...] = (
    Block(f"{CHART}/README.md", "values", f"{SCHEMA} and values.yaml", values_table),
)
