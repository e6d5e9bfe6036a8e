"""The field table (fields.py) drives both paths: every field it lists is recognised, and every
feed of every kind reaches its metric with the same value through the reference parser and
through the chunk scanner. A feed added to the table that one path does not carry fails here."""

from __future__ import annotations

import pytest

from specserve.buckets import concurrency_bucket
from specserve_exporter import names
from specserve_exporter.fields import (
    FIELDS,
    GRAPHS,
    LINE_KINDS,
    Field,
    Kind,
    LineKind,
    Read,
    Value,
    captured_fields,
)
from specserve_exporter.ingest import Ingestor
from specserve_exporter.parser import StatsLine, parse_line
from specserve_exporter.shape import Shape
from specserve_exporter.state import LogState

from .test_ingest import CONFIG, assert_same

LINES = 40
RANKS = (("dp", "0"), ("pp", "0"), ("tp", "0"))


def _printed(field: Field, index: int) -> tuple[bytes, float]:
    """A value for `field`, different for each field: a count for "#..." fields, else a
    decimal, each in the form SGLang prints it."""
    if field.printed.startswith(b"#"):
        return b"%d" % (index + 2), float(index + 2)
    return b"%d.25" % (index + 1), index + 1.25


def _line(line_kind: LineKind, graph: Field) -> tuple[bytes, dict[str, float]]:
    """A stats line of the kind holding every field its feeds read (one graph state)."""
    fields = dict.fromkeys(
        f.field for f in line_kind.feeds if f.field.value is not Value.GRAPH)
    values: dict[str, float] = {}
    parts = []
    for i, field in enumerate(fields):
        text, values[field.name] = _printed(field, i)
        parts.append(field.printed + b": " + text)
    if any(f.field.value is Value.GRAPH for f in line_kind.feeds):
        parts.append(graph.printed + b": True")
    body = b", ".join(parts)
    return b"[2026-02-23 17:53:14 TP0] " + line_kind.marker + b", " + body + b"\n", values


def _expected(line_kind: LineKind, values: dict[str, float], graph: Field) -> dict:
    """The sample each feed must produce after LINES lines, from the table alone."""
    out: dict[tuple[str, tuple], float] = {}
    for feed in line_kind.feeds:
        metric, field = feed.metric, feed.field
        if field.value is Value.GRAPH:
            if field is not graph:
                continue
            if feed.read is Read.EVERY_LINE:  # the state read as 1 (True), by the key's bucket
                assert feed.key is not None
                key = concurrency_bucket(int(values[feed.key.name]))
                labels = tuple(sorted((*RANKS, ("graph", field.label), ("concurrency", key))))
                out[(metric.count, labels)] = LINES
                out[(metric.sum, labels)] = LINES * 1.0
            else:
                out[(metric.name, tuple(sorted((*RANKS, ("graph", field.label)))))] = 1.0
            continue
        value = values[field.name]
        labels: tuple = RANKS
        if field.label:
            labels = tuple(sorted((*RANKS, ("pool", field.label))))
        if feed.read is Read.EVERY_LINE:
            if feed.key is not None:
                key = concurrency_bucket(int(values[feed.key.name]))
                labels = tuple(sorted((*labels, ("concurrency", key))))
            if metric.type is names.MetricType.COUNTER:
                out[(metric.total, labels)] = LINES * value
            else:
                out[(metric.count, labels)] = LINES
                out[(metric.sum, labels)] = LINES * value
        elif metric is names.DECODE_DRAFT_ACCEPTANCE:
            assert CONFIG.draft_tokens is not None
            out[(metric.name, labels)] = (value - 1) / (CONFIG.draft_tokens - 1)
        else:
            out[(metric.name, labels)] = value
    return out


# Decode lines once per graph state SGLang can print (a line prints one); prefill lines once.
CASES = [(Kind.DECODE, graph) for graph in GRAPHS] + [(Kind.PREFILL, GRAPHS[0])]


@pytest.mark.parametrize(("kind", "graph"), CASES, ids=[f"{k}-{g.label}" for k, g in CASES])
def test_every_feed_reaches_its_metric_on_both_paths(kind: Kind, graph: Field) -> None:
    line_kind = LINE_KINDS[kind]
    line, values = _line(line_kind, graph)
    parsed = parse_line(line)
    assert isinstance(parsed, StatsLine) and parsed.unknown_fields == 0, line
    # The first chunk teaches the shape; the second must go through the scanner.
    ingestor = Ingestor(LogState(CONFIG))
    ingestor.feed(line)
    assert ingestor._fast(line * LINES, LINES, 0.0), "the chunk scanner did not read the line"
    samples = assert_same([line, line * (LINES - 1)])  # fast path == reference path
    for key, value in _expected(line_kind, values, graph).items():
        assert key in samples, f"{key[0]} {dict(key[1])}: no sample"
        assert samples[key] == pytest.approx(value), key
    assert samples[("specserve_log_lines_parsed_total", (("kind", kind.value),))] == LINES


@pytest.mark.parametrize("kind", list(Kind))
def test_the_scanner_reads_from_every_line_exactly_the_every_line_fields(kind: Kind) -> None:
    line_kind = LINE_KINDS[kind]
    line, _ = _line(line_kind, GRAPHS[0])
    parsed = parse_line(line)
    assert isinstance(parsed, StatsLine)
    shape = Shape(kind, line.rstrip(b"\n"), parsed)
    # Every one the line prints: of the graph states, the one it holds.
    printed = {f.printed for f in captured_fields(kind) if b" " + f.printed + b": " in line}
    assert printed >= {f.printed for f in captured_fields(kind) if f.value is not Value.GRAPH}
    assert set(shape.captured) == printed


def test_every_field_of_the_table_is_recognised_by_both_paths() -> None:
    """A line holding every known field: nothing unknown, and the scanner learns its shape."""
    numeric = [f for f in FIELDS if f.value is Value.NUMBER]
    parts = [f.printed + b": " + _printed(f, i)[0] for i, f in enumerate(numeric)]
    parts += [GRAPHS[0].printed + b": False", b"est uncap acc len: 2.67 [1.67, 3.67]"]
    line = b"[2026-02-23 17:53:14 TP0] Decode batch, " + b", ".join(parts)
    parsed = parse_line(line)
    assert isinstance(parsed, StatsLine) and parsed.unknown_fields == 0
    Shape(Kind.DECODE, line, parsed)  # raises when the scanner cannot hold a field
    assert_same([line + b"\n", (line + b"\n") * 5])


def test_the_table_is_consistent() -> None:
    printed = [f.printed for f in FIELDS]
    assert len(printed) == len(set(printed)), "a field is listed twice"
    assert len({f.name for f in FIELDS}) == len(FIELDS), "two fields share an exporter name"
    for line_kind in LINE_KINDS.values():
        for feed in line_kind.feeds:
            assert feed.field in FIELDS, feed
            assert feed.metric in names.ALL, feed.metric
            assert (feed.read is Read.EVERY_LINE) == (
                feed.metric.type is not names.MetricType.GAUGE), feed
            if feed.key is not None:
                assert names.CONCURRENCY in feed.metric.labels, feed
            if feed.field.label:
                assert len(feed.metric.labels) == len(names.RANK_LABELS) + 1 + bool(feed.key)
        for required in line_kind.required:
            assert any(f.field is required for f in line_kind.feeds), required
