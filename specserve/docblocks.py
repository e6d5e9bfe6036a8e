"""Reference tables generated into hand-written docs, between marker comments.

Each `Block` is one table in one Markdown file: the prose around it stays hand-written, the lines
between `<!-- BEGIN GENERATED name: ... -->` and `<!-- END GENERATED name -->` are its source's.
`doc_files` is this part of `specserve generate`'s registry (specserve/generate/command.py): one
entry per file, which rewrites every block of that file, so `--check` reports a hand edit of a
table, or a source changed without regenerating, as a stale file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

ReadSource = Callable[[str], str]


class BlockError(Exception):
    """A doc lost the marker lines of one of its generated blocks."""


@dataclass(frozen=True)
class Block:
    path: str  # the Markdown file, relative to the repository root
    name: str  # the marker's name, unique within the file
    source: str  # what the table is generated from, named in the BEGIN marker
    # The table's Markdown (without the markers), from the repository root (to list files) and
    # the registry's reader (a generated source is read through its generator).
    table: Callable[[Path, ReadSource], str]

    @property
    def begin(self) -> str:
        return (f"<!-- BEGIN GENERATED {self.name}: from {self.source}; "
                "regenerate with `specserve generate` -->\n")  # fmt: skip

    @property
    def end(self) -> str:
        return f"<!-- END GENERATED {self.name} -->\n"


def replace(text: str, block: Block, body: str) -> str:
    """`text` with `body` between `block`'s markers (the BEGIN line rewritten too, so a renamed
    source shows)."""
    pattern = re.compile(
        rf"<!-- BEGIN GENERATED {re.escape(block.name)}:[^\n]*\n.*?{re.escape(block.end)}", re.S
    )
    if not pattern.search(text):
        raise BlockError(
            f"{block.path} lost its '<!-- BEGIN GENERATED {block.name}' / "
            f"'{block.end.strip()}' marker lines: restore them around the generated table"
        )
    return pattern.sub(lambda _m: block.begin + body + block.end, text, count=1)


def cell(text: str) -> str:
    """One Markdown table cell: a `|` escaped, lines joined."""
    return " ".join(text.split()).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def code(text: str) -> str:
    """`text` as inline code, with a fence long enough for the backticks inside it."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def files(blocks: Sequence[Block], root: Path, read: ReadSource) -> Mapping[str, Callable[[], str]]:
    """Path -> function producing the file: its current text with every block regenerated."""
    by_path: dict[str, list[Block]] = {}
    for block in blocks:
        by_path.setdefault(block.path, []).append(block)

    def produce(path: str) -> str:
        text = read(path)
        for block in by_path[path]:
            text = replace(text, block, block.table(root, read))
        return text

    return {path: (lambda path=path: produce(path)) for path in by_path}


def value(data: object) -> str:
    """A default as a cell: YAML's spelling of a scalar, a collection as compact JSON (valid
    YAML flow), both as inline code."""
    if data is None:
        return code("null")
    if isinstance(data, bool):
        return code(str(data).lower())
    if isinstance(data, str):
        # Quoted where YAML would read the bare word as something else ("1", "true", "").
        return code(data) if data and _reads_as(data) == data else code(json.dumps(data))
    if isinstance(data, int | float):
        return code(f"{data:g}" if isinstance(data, float) else str(data))
    return code(json.dumps(data, separators=(", ", ": ")))


def _reads_as(text: str) -> object:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # not a YAML scalar at all: shown as it is
