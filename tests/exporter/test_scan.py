"""The chunk scanner (_scan.c) against the regular expression its program stands for.

shape.py documents each operation as a regex (LITERAL: the text, INTEGER: \\d++, ...). The oracle
here translates a shape's program into that regex and reads a chunk with Python's `re` and
`float()`: the scanner must reject exactly the chunks the regex rejects, and otherwise give the
same counts and, summing in the same order, the same sums bit for bit.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specserve_exporter import _scan
from specserve_exporter.parser import Kind, StatsLine, parse_line
from specserve_exporter.shape import (
    MARKERS,
    NO_SLOT,
    HistogramSpec,
    Op,
    Scanned,
    Shape,
    Sums,
)

from .test_ingest import _mutate, assert_same, decode_line
from .test_parser import DECODE_VARIANTS, PREFILL_VARIANTS, SEED_LINE

BOUNDS = (1.0, 2.0, 2.5, 100.0, 1000.0)
THROUGHPUT = b"gen throughput (token/s)"
_OP_REGEX = {
    Op.INTEGER: rb"(\d++)",
    Op.DECIMAL: rb"(\d++\.\d++)",
    Op.BOOLEAN: rb"(?:True|False)",
    Op.TEXT: rb"[^,\n]*+",
    Op.COUNTER: rb"(?: ?\[\d+\])?",
}


def shape_of(line: bytes) -> Shape:
    parsed = parse_line(line)
    assert isinstance(parsed, StatsLine), parsed
    return Shape(parsed.kind, line, parsed)


def oracle_regex(shape: Shape) -> tuple[re.Pattern[bytes], list[int]]:
    """The shape as one regex; and, per regex group, the scanner slot it fills (-1: checked)."""
    parts: list[bytes] = []
    slots: list[int] = []
    for code, arg in shape.program:
        if code == Op.LITERAL:
            assert isinstance(arg, bytes)
            parts.append(re.escape(arg))
            continue
        parts.append(_OP_REGEX[Op(code)])
        if code in (Op.INTEGER, Op.DECIMAL):
            assert isinstance(arg, int)
            slots.append(arg)
    behind = b""
    if shape.guard or shape.behind:
        guard = re.sub(rb"\d", rb"\\d", re.escape(shape.guard))
        behind = rb"(?<=" + guard + re.escape(shape.behind + MARKERS[shape.kind]) + b")"
    marker = re.escape(MARKERS[shape.kind])
    # At each marker: the whole line, or else the empty alternative (a marker of another shape).
    pattern = marker + b"(?:" + behind + b"".join(parts) + b"$()|)"
    return re.compile(pattern, re.MULTILINE), slots


def oracle_scan(shape: Shape, chunk: bytes, specs: list[HistogramSpec]) -> Scanned | None:
    regex, slots = oracle_regex(shape)
    histograms: dict[bytes, Sums] = {spec.value: {} for spec in specs}
    lines = 0
    for match in regex.finditer(chunk):
        if match.group(match.re.groups) is None:  # the empty alternative: not of the shape
            return None
        values: dict[int, float] = {}
        for group, slot in enumerate(slots, start=1):
            if slot >= 0:
                values[slot] = float(match.group(group))
        for spec in specs:
            out = histograms[spec.value]
            value = values[shape.captured.index(spec.value)]
            key_value = 0.0 if spec.key is None else values[shape.captured.index(spec.key)]
            if key_value >= 2**53:
                return None  # not an exact integer as a double: the reference parser reads it
            key = int(key_value)
            counts, total = out.get(key, ([0] * (len(spec.bounds) + 1), 0.0))
            bucket = next((i for i, b in enumerate(spec.bounds) if value <= b), len(spec.bounds))
            counts[bucket] += 1
            out[key] = (counts, total + value)
        lines += 1
    return Scanned(lines, histograms)


def specs_for(shape: Shape) -> list[HistogramSpec]:
    if shape.kind is Kind.DECODE:
        specs = [HistogramSpec(THROUGHPUT, b"#running-req", BOUNDS)]
        if shape.has(b"accept len"):
            specs.append(HistogramSpec(b"accept len", None, BOUNDS))
        return specs
    return [HistogramSpec(b"#new-token", None, ())]


def assert_agrees(shape: Shape, chunk: bytes) -> Scanned | None:
    specs = specs_for(shape)
    got = shape.scan(chunk, specs)
    assert got == oracle_scan(shape, chunk, specs)
    return got


VARIANT_LINES = [p.values[0] for p in DECODE_VARIANTS + PREFILL_VARIANTS] + [SEED_LINE]


def _try_shape(line: bytes) -> Shape | None:
    try:
        return shape_of(line)
    except (ValueError, AssertionError):
        return None


SHAPES = [(line, shape) for line in VARIANT_LINES if (shape := _try_shape(line)) is not None]


def test_most_documented_variants_are_learnable_shapes() -> None:
    # Multi-rank prefixes (DP attention, PP) are left to the reference parser on purpose.
    assert len(SHAPES) >= len(VARIANT_LINES) - 6, [line for line in VARIANT_LINES]
    for line, shape in SHAPES:
        found = assert_agrees(shape, line + b"\n")
        assert found is not None and found.lines == 1, line


@pytest.mark.parametrize(("line", "shape"), SHAPES, ids=[s.kind + str(i) for i, (_, s) in
                                                          enumerate(SHAPES)])
def test_a_chunk_of_one_shape_is_read_whole(line: bytes, shape: Shape) -> None:
    chunk = b"HTTP 200 OK\n".join([line + b"\n"] * 50)
    found = assert_agrees(shape, chunk)
    assert found is not None and found.lines == 50


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_lines_are_rejected_exactly_when_the_regex_rejects_them(
    data: st.DataObject,
) -> None:
    line, shape = data.draw(st.sampled_from(SHAPES))
    lines = [_mutate(line, data) if data.draw(st.booleans()) else line
             for _ in range(data.draw(st.integers(1, 8)))]
    chunk = b"\n".join(lines) + (b"\n" if data.draw(st.booleans()) else b"")
    assert_agrees(shape, chunk)


@settings(max_examples=300, deadline=None)
@given(
    integer=st.text("0123456789", min_size=1, max_size=40),
    fraction=st.text("0123456789", min_size=1, max_size=40),
)
def test_numbers_convert_exactly_as_float_does(integer: str, fraction: str) -> None:
    # Short numbers take the scanner's exact fast path, long ones CPython's own conversion.
    shape = shape_of(SEED_LINE)
    text = f"{integer}.{fraction}".encode()
    chunk = SEED_LINE.replace(b"66.89", text) + b"\n"
    found = shape.scan(chunk, [HistogramSpec(THROUGHPUT, None, ())])
    assert found is not None
    assert found.histograms[THROUGHPUT] == {0: ([1], float(text))}


def test_a_number_too_long_for_the_scanner_sends_the_chunk_to_the_reference_parser() -> None:
    shape = shape_of(SEED_LINE)
    chunk = SEED_LINE.replace(b"66.89", b"9" * 400 + b".5") + b"\n"
    assert shape.scan(chunk, []) is None
    # The reference parser reads it as the overflowed float it is, and rejects it.
    assert parse_line(chunk.rstrip()) is not None


def test_many_distinct_keys_are_each_counted() -> None:
    rng = random.Random(1)
    lines = [decode_line(rng) for _ in range(3000)]
    shape = shape_of(lines[0])
    found = assert_agrees(shape, b"\n".join(lines) + b"\n")
    assert found is not None
    running = {int(re.search(rb"#running-req: (\d+)", line).group(1)) for line in lines}
    assert set(found.histograms[THROUGHPUT]) == running and len(running) > 30


def test_a_key_beyond_exact_integers_sends_the_chunk_to_the_reference_parser() -> None:
    shape = shape_of(SEED_LINE)
    chunk = SEED_LINE.replace(b"#running-req: 1,", b"#running-req: 99999999999999999999,") + b"\n"
    spec = HistogramSpec(THROUGHPUT, b"#running-req", BOUNDS)
    assert shape.scan(chunk, [spec]) is None


def test_the_rank_guard_keeps_other_ranks_out() -> None:
    shape = shape_of(SEED_LINE)
    other_rank = SEED_LINE.replace(b" TP0]", b" DP1 TP0]")
    assert shape.scan(other_rank + b"\n", []) is None
    assert shape.scan(SEED_LINE.replace(b" TP0]", b" TP1]") + b"\n", []) is None
    # A marker at the very start of the chunk has no room for the prefix: not of the shape.
    assert shape.scan(SEED_LINE[SEED_LINE.index(b"Decode"):] + b"\n", []) is None


def test_bad_programs_are_refused_with_a_message() -> None:
    with pytest.raises(ValueError, match="unknown operation 99"):
        _scan.scan(b"x\n", b"x", b"", b"", ((99, None),), ())
    with pytest.raises(ValueError, match="slot out of range"):
        _scan.scan(b"x\n", b"x", b"", b"", ((int(Op.INTEGER), 99),), ())
    with pytest.raises(ValueError, match="histogram slot"):
        _scan.scan(b"x\n", b"x", b"", b"", ((int(Op.INTEGER), 0),), ((3, NO_SLOT, ()),))
    with pytest.raises(ValueError, match="empty marker"):
        _scan.scan(b"x\n", b"", b"", b"", (), ())
    with pytest.raises(TypeError):
        _scan.scan(b"x\n", b"x", b"", b"", ((int(Op.LITERAL), 5),), ())


def test_a_layout_too_big_for_the_scanner_is_left_to_the_reference_parser() -> None:
    # 200 unknown fields make a program longer than the scanner takes: no shape is learned,
    # and every line is still read, by the reference parser.
    line = SEED_LINE + b"".join(b", extra%d: %d" % (i, i) for i in range(200))
    with pytest.raises(ValueError, match="program too long"):
        shape_of(line)
    body = b"\n".join([line] * 20) + b"\n"
    samples = assert_same([body, body])
    assert samples[("specserve_log_lines_parsed_total", (("kind", "decode"),))] == 40
    assert samples[("specserve_log_unknown_fields_total", ())] == 40 * 200
