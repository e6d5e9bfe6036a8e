"""Parse one SGLang scheduler stats line (Decode or Prefill batch) into typed fields.

This is the reference parser: it reads every variant SGLang prints (the corpus its own formatter
wrote, tests/fixtures/sglang-logs/) field by field, so it knows each field it meets (the field
table, fields.py) and counts the ones it does not.
`ingest` parses whole chunks faster but must agree with this module on every line (a property
test holds them together).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from .fields import BY_PRINTED, EXPORTED, LINE_KINDS, Kind, Value


class Reason(StrEnum):
    """Why a stats line was rejected; the `reason` label of lines_rejected_total."""

    MISSING_FIELD = "missing_field"  # a Decode line without #running-req or gen throughput
    BAD_VALUE = "bad_value"  # a known field whose value does not parse
    MALFORMED = "malformed"  # looks like a stats line but has no field list
    INVALID_UTF8 = "invalid_utf8"  # bytes that are not UTF-8 inside a stats line
    TOO_LONG = "too_long"  # a line over the exporter's line-length limit


@dataclass(frozen=True, slots=True)
class Ranks:
    dp: str = "0"
    tp: str = "0"
    pp: str = "0"


NO_RANKS = Ranks()


@dataclass(slots=True)
class StatsLine:
    kind: Kind
    ranks: Ranks
    # Exported fields, by the exporter's own field names (fields.Field.name).
    values: dict[str, float] = field(default_factory=dict)
    graph: str | None = None  # "cuda", "cpu", ... when the line names a graph state
    graph_on: bool | None = None
    unknown_fields: int = 0


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: Reason
    line: bytes


# After "Decode batch"/"Prefill batch": optional iteration counter "[1234]", "." or ",", a space.
# The groups (counter, separator) are what a learned shape (shape.py) repeats.
HEAD_TAIL = re.compile(rb"( ?\[\d+\])?([.,]?) ")
# The prefix SGLang's default format puts before the message: "[time ranks] ".
_PREFIX = re.compile(rb"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?((?: [A-Z_]+\d+)*)\] $")
_RANK = re.compile(rb"([A-Z_]+?)(\d+)")
_RANK_LABELS: dict[bytes, str] = {b"DP": "dp", b"TP": "tp", b"PP": "pp"}
_rank_cache: dict[bytes, Ranks] = {}

MAX_LINE_BYTES = 64 * 1024
DECODE_MARKER = LINE_KINDS[Kind.DECODE].marker
PREFILL_MARKER = LINE_KINDS[Kind.PREFILL].marker
# The names of the fields a line of each kind must hold, or it is rejected (missing_field).
_REQUIRED: dict[Kind, tuple[str, ...]] = {
    kind: tuple(f.name for f in line_kind.required) for kind, line_kind in LINE_KINDS.items()
}


def parse_ranks(rank_part: bytes) -> Ranks:
    """' DP1 TP0' -> Ranks(dp='1', tp='0'). Ranks other than DP/TP/PP do not become labels:
    only the first attention-TP rank of each DP group prints, so dp/tp/pp identify a series."""
    found: dict[str, str] = {}
    for name, number in _RANK.findall(rank_part):
        label = _RANK_LABELS.get(name)
        if label is not None:
            found[label] = number.decode()
    return Ranks(**found) if found else NO_RANKS


def ranks_of_prefix(prefix: bytes) -> Ranks:
    """Ranks from the text before the message ("[2026-02-23 17:53:14 DP0 TP0] ")."""
    # Key on the part after the date and time: it is what varies between ranks.
    cacheable = prefix[:1] == b"[" and prefix[14:15] == b":"
    ranks = _rank_cache.get(prefix[20:]) if cacheable else None
    if ranks is not None:
        return ranks
    match = _PREFIX.match(prefix)
    # With a custom SGLANG_LOGGING_CONFIG_PATH the prefix is unknown; the message still parses.
    ranks = parse_ranks(match.group(1)) if match else NO_RANKS
    if cacheable and len(_rank_cache) < 4096:
        _rank_cache[prefix[20:]] = ranks
    return ranks


def parse_line(line: bytes) -> StatsLine | Rejected | None:
    """Parse a Decode/Prefill stats line. None: not a stats line (an HTTP access line, a warning).

    Never raises: anything unexpected in a stats line is a Rejected with its reason.
    """
    start = line.find(DECODE_MARKER)
    if start >= 0:
        kind, end = Kind.DECODE, start + len(DECODE_MARKER)
    else:
        start = line.find(PREFILL_MARKER)
        if start < 0:
            return None
        kind, end = Kind.PREFILL, start + len(PREFILL_MARKER)
    line = line.rstrip(b"\r\n")
    if len(line) > MAX_LINE_BYTES:
        return Rejected(Reason.TOO_LONG, line[:200])
    head = HEAD_TAIL.match(line, end)
    if head is None:
        return Rejected(Reason.MALFORMED, line)
    if not line.isascii():
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            return Rejected(Reason.INVALID_UTF8, line)
    ranks = ranks_of_prefix(line[:start]) if start else NO_RANKS
    body = line[head.end():].strip().rstrip(b",").strip()
    if not body:
        return Rejected(Reason.MALFORMED, line)
    parsed = StatsLine(kind=kind, ranks=ranks)
    values = parsed.values
    for part in split_fields(body):
        name, sep, raw = part.partition(b": ")
        if not sep:
            parsed.unknown_fields += 1
            continue
        known = BY_PRINTED.get(name)
        if known is None:
            parsed.unknown_fields += 1
        elif known not in EXPORTED:
            continue  # recognised; not a metric, so not checked
        elif known.value is Value.GRAPH:
            raw = raw.strip()
            if raw not in (b"True", b"False"):
                return Rejected(Reason.BAD_VALUE, line)
            parsed.graph = known.label
            parsed.graph_on = raw == b"True"
            values[known.name] = 1.0 if parsed.graph_on else 0.0  # names.DECODE_GRAPH_LINES
        else:
            raw = raw.strip()
            if known.value is Value.ESTIMATE:  # "mid [lo, hi]": the mid value
                raw = raw.partition(b" [")[0]
            number = _number(raw)
            if number is None:
                return Rejected(Reason.BAD_VALUE, line)
            values[known.name] = number
    for required in _REQUIRED[kind]:
        if required not in values:
            return Rejected(Reason.MISSING_FIELD, line)
    return parsed


def split_fields(body: bytes) -> list[bytes]:
    """The ", "-separated fields of a line's body. Only DSPARK's estimate holds ", " in a value,
    inside brackets ("est uncap acc len: 2.67 [1.67, 3.67]"), so the bracket-aware split runs only
    on bodies that hold a "[" at all."""
    if b"[" not in body:
        return body.split(b", ")
    return _FIELD_SEPARATOR.split(body)


# ", " not inside "[...]": no "]" ahead before the next "[".
_FIELD_SEPARATOR = re.compile(rb", (?![^\[]*\])")


def read_fields(line: bytes) -> dict[bytes, float | bool | bytes] | None:
    """Every field of a stats line by its printed name, each value read as the exporter reads it:
    numbers as floats (a "%" dropped), graph states as bools, DSPARK's estimate as its mid value;
    names the exporter does not know map to their raw text. None when not a stats line.

    parse_line converts only the fields that become metrics; this reads all of them, for tests
    and for tools that check a log against a format (tests/exporter/test_sglang_corpus.py)."""
    parsed = parse_line(line)
    if not isinstance(parsed, StatsLine):
        return None
    # The same head as parse_line found: the first marker, the kind's.
    marker = DECODE_MARKER if parsed.kind is Kind.DECODE else PREFILL_MARKER
    line = line.rstrip(b"\r\n")
    head = HEAD_TAIL.match(line, line.find(marker) + len(marker))
    assert head is not None  # parse_line accepted it
    out: dict[bytes, float | bool | bytes] = {}
    for part in split_fields(line[head.end():].strip().rstrip(b",").strip()):
        name, _, raw = part.partition(b": ")
        raw = raw.strip()
        known = BY_PRINTED.get(name)
        if known is None or known.value is Value.TEXT:
            out[name] = raw
        elif known.value is Value.GRAPH:
            out[name] = raw == b"True"
        else:
            number = _number(raw.partition(b" [")[0])
            out[name] = raw if number is None else number
    return out


def _number(raw: bytes) -> float | None:
    # "fwd occupancy: 87.5%" carries a percent sign; every other value is a plain number.
    if raw.endswith(b"%"):
        raw = raw[:-1]
    try:
        value = float(raw)
    except ValueError:
        return None
    # SGLang prints no negative, NaN or infinite value: such a value means a corrupted line.
    if value != value or value < 0 or value == float("inf"):
        return None
    return value
