"""A stats-line layout learned from one parsed line, compiled for the chunk scanner (_scan.c).

Most of an SGLang log is stats lines of one layout printed by one rank. A Shape is that layout
exactly: field names, order, separators, the form each number is printed in, and the line's
tail. `scan` finds every line holding the kind's marker in a chunk and, when all of them are of
the shape, returns the histograms and sums the metrics need; when one is not, it returns None and
the caller reads the chunk with the reference parser.

The program is the regular expression such a line would need, as operations the scanner runs
with no backtracking (every quantifier possessive):

    marker (?<=guard behind) counter? separator " " field ", " field ... line_end $
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from . import _scan
from .fields import BY_PRINTED, EXPORTED, LINE_KINDS, Feed, Kind, Value, captured_fields
from .parser import HEAD_TAIL, StatsLine, split_fields
from .window import Sums


class Op(IntEnum):
    """The scanner's operations; the numbers are _scan.c's."""

    LITERAL = 0  # the argument's bytes, exactly
    INTEGER = 1  # \d++
    DECIMAL = 2  # \d++\.\d++
    BOOLEAN = 3  # True|False
    TEXT = 4  # [^,\n]*+: a field the exporter only recognises
    COUNTER = 5  # (?: ?\[\d+\])?: SGLang's optional iteration counter


if any(getattr(_scan, f"OP_{op.name}", None) != op for op in Op) or not getattr(
    _scan, "BOOLEAN_SLOTS", 0
):
    raise ImportError(
        f"{_scan.__file__} was built from another version of _scan.c: rebuild it "
        "(pip install -e . or bash scripts/setup/python.sh)"
    )

MARKERS: dict[Kind, bytes] = {kind: line_kind.marker for kind, line_kind in LINE_KINDS.items()}
# The values read from every line, per kind (the field table's EVERY_LINE feeds and their keys);
# the gauges come from the chunk's last line.
CAPTURED: dict[Kind, tuple[bytes, ...]] = {
    kind: tuple(f.printed for f in captured_fields(kind)) for kind in Kind
}
# Of those, the ones the reference parser requires: a shape must have them.
_REQUIRED_CAPTURED: dict[Kind, frozenset[bytes]] = {
    kind: frozenset(f.printed for f in line_kind.required) & frozenset(CAPTURED[kind])
    for kind, line_kind in LINE_KINDS.items()
}
# A slot index meaning none: a number only checked, a histogram over all lines (no key).
NO_SLOT = -1

_TP_RANK = re.compile(rb" TP\d+$")
# The form a number was printed in. Stricter than the reference parser on purpose: SGLang prints
# each field in one fixed format, and a line printed in another form is not lost, it only sends
# its chunk through the reference parser.
_INTEGER = re.compile(rb"\d+")
_DECIMAL = re.compile(rb"\d+\.\d+")
_NUMBER = re.compile(rb"(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class HistogramSpec:
    """What the scanner sums per line: `value`, bucketed by `bounds`, per integer `key`."""

    value: bytes
    key: bytes | None
    bounds: tuple[float, ...]

    @classmethod
    def of(cls, feed: Feed) -> HistogramSpec:
        """The sums an EVERY_LINE feed of the field table needs."""
        key = None if feed.key is None else feed.key.printed
        return cls(feed.field.printed, key, feed.bounds)



@dataclass(frozen=True)
class Scanned:
    lines: int
    histograms: dict[bytes, Sums]  # by HistogramSpec.value


class Shape:
    __slots__ = ("behind", "captured", "guard", "kind", "program", "unknown_fields")

    def __init__(self, kind: Kind, line: bytes, parsed: StatsLine) -> None:
        """Learn the shape of `line`, which the reference parser read as `parsed`.

        ValueError when the line cannot be a shape: several rank words, no required value.
        """
        self.kind = kind
        # Where the reference parser found the head: the first marker of the line.
        start = line.find(MARKERS[kind])
        head = HEAD_TAIL.match(line, start + len(MARKERS[kind])) if start >= 0 else None
        if head is None:
            raise ValueError("no stats-line head")
        prefix = line[:start]
        bracketed = prefix.endswith(b"] ")
        # Rank part: the text between the timestamp and "] " (" TP0"), or nothing.
        inner = prefix[:-2] if bracketed else b""
        tail = inner[inner.rfind(b" "):] if inner else b""
        rank_tail = tail if _TP_RANK.match(tail) else b""
        if bracketed:
            # The rank part and the 3 bytes before it, the timestamp's tail (":14", "123"), so
            # " DP1 TP0] Decode" never passes for " TP0]".
            self.guard = inner[: len(inner) - len(rank_tail)][-3:]
            if len(self.guard) != 3 or not all(c in b"0123456789:." for c in self.guard):
                # Several rank words (DP attention, PP): the reference path reads them per line.
                raise ValueError("multi-rank prefix")
            self.behind = rank_tail + b"] "
        else:
            self.guard = self.behind = b""
        program: list[tuple[Op, bytes | int | None]] = []
        if head.group(1):
            program.append((Op.COUNTER, None))
        program.append((Op.LITERAL, head.group(2) + b" "))
        rest = line[head.end():]
        body = rest.rstrip(b"\r").rstrip(b" ").rstrip(b",")
        line_end = rest[len(body):]  # "", ",", ", ", " ", "\r": printed the same on every line
        captured: list[bytes] = []
        for i, part in enumerate(split_fields(body)):
            if i:
                program.append((Op.LITERAL, b", "))
            name, sep, raw = part.partition(b": ")
            if not sep:
                program.append((Op.LITERAL, part))  # an unknown bare word: the same text
                continue
            program.append((Op.LITERAL, name + b": "))
            known = BY_PRINTED.get(name)
            if known is not None and known.value is Value.GRAPH:
                # True|False either way: read as 1 or 0 where a histogram needs every line's.
                slot = None
                if name in CAPTURED[kind]:
                    slot = len(captured)
                    captured.append(name)
                program.append((Op.BOOLEAN, slot))
            elif name in CAPTURED[kind] or (known in EXPORTED and known.value is Value.NUMBER):
                slot = NO_SLOT  # an exported value of the last line only: checked, not read
                if name in CAPTURED[kind]:
                    slot = len(captured)
                    captured.append(name)
                program.append((_number_op(raw.removesuffix(b"%")), slot))
                if raw.endswith(b"%"):
                    program.append((Op.LITERAL, b"%"))
            elif b"[" in raw:
                # A bracketed value (DSPARK's "2.67 [1.67, 3.67]") holds ", ", which TEXT stops
                # at: its numbers are checked in their printed form, the rest matched exactly.
                for j, piece in enumerate(_NUMBER.split(raw)):
                    program.append((_number_op(piece), NO_SLOT) if j % 2 else (Op.LITERAL, piece))
            else:
                program.append((Op.TEXT, None))
        program.append((Op.LITERAL, line_end))
        if not captured or not _REQUIRED_CAPTURED[kind] <= set(captured):
            raise ValueError("a required value is missing")
        self.captured = tuple(captured)
        self.program = _merge_literals(program)
        self.unknown_fields = parsed.unknown_fields
        if self.scan(line, ()) is None:
            raise ValueError("the shape does not match the line it was learned from")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[object, ...]:
        return (self.kind, self.guard, self.behind, self.program)

    @property
    def bracketed(self) -> bool:
        """Lines of SGLang's default format: "[time ranks] " before the marker."""
        return bool(self.behind)

    def has(self, name: bytes) -> bool:
        return name in self.captured

    def scan(self, chunk: bytes, histograms: Sequence[HistogramSpec]) -> Scanned | None:
        """Every line of `chunk` (complete lines) holding the marker, if all are of this shape;
        the histograms of those `histograms` whose values the shape has."""
        wanted = [h for h in histograms if self.has(h.value)]
        specs = tuple(
            (self.captured.index(h.value),
             NO_SLOT if h.key is None else self.captured.index(h.key), h.bounds)
            for h in wanted
        )
        found = _scan.scan(
            chunk, MARKERS[self.kind], self.guard, self.behind, self.program, specs)
        if found is None:
            return None
        lines, sums = found
        return Scanned(lines, {h.value: s for h, s in zip(wanted, sums, strict=True)})


def _number_op(raw: bytes) -> Op:
    if _INTEGER.fullmatch(raw):
        return Op.INTEGER
    if _DECIMAL.fullmatch(raw):
        return Op.DECIMAL
    # float() reads more ("1e5", "1_000", "+5"); SGLang prints none of them.
    raise ValueError(f"a number printed as {raw!r}: left to the reference parser")


def _merge_literals(
    program: list[tuple[Op, bytes | int | None]],
) -> tuple[tuple[int, bytes | int | None], ...]:
    merged: list[tuple[int, bytes | int | None]] = []
    for op, arg in program:
        if op is Op.LITERAL:
            assert isinstance(arg, bytes)
            if not arg:
                continue
            if merged and merged[-1][0] == Op.LITERAL:
                previous = merged.pop()[1]
                assert isinstance(previous, bytes)
                arg = previous + arg
        merged.append((int(op), arg))
    return tuple(merged)
