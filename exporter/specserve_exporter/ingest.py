"""Turn chunks of complete log lines into state updates, fast.

The reference parser (parser.py) reads one line at a time. Most of an SGLang log is stats lines of
one layout printed by one rank, so for a chunk whose stats lines all share the layout ("shape") and
rank of the last ones parsed, one regex `findall` per kind over the whole chunk (in C) extracts the
few values every window feeds into histograms and counters, and flags any line holding the kind's
marker that is not of the shape. Gauges only show the last window, so they are set from the
chunk's last line through the reference parser. Anything else (a new shape, several ranks,
non-ASCII bytes, a flagged line) takes the reference parser for that chunk, which also learns the
new shapes. Property tests keep the two paths equal.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from operator import itemgetter

from specserve.buckets import concurrency_bucket

from .histogram import Histogram
from .parser import (
    DECODE_MARKER,
    EXPORTED_FIELDS,
    FIELD_NAMES,
    GRAPH_LABELS,
    MAX_LINE_BYTES,
    PREFILL_MARKER,
    Kind,
    Ranks,
    Rejected,
    StatsLine,
    parse_line,
)
from .state import LogState

_TP_RANK = re.compile(rb" TP\d+$")
# The regex a shape uses for a number, by the form its sample value was printed in. Stricter than
# parser._number on purpose: SGLang prints each field in one fixed format, and a line printed in
# another form is not lost, it only sends its chunk through the reference parser.
_INTEGER = re.compile(rb"\d+")
_DECIMAL = re.compile(rb"\d+\.\d+")
_ANY_NUMBER = rb"\d++(?:\.\d++)?"
# The values read from every line, per kind; everything else comes from the chunk's last line.
# The first one is required by the reference parser, so a shape always captures it and a whole-line
# match fills it: a match with every value empty is a line the shape missed (see Shape).
_CAPTURED: dict[Kind, tuple[bytes, ...]] = {
    Kind.DECODE: (b"#running-req", b"accept len", b"gen throughput (token/s)"),
    Kind.PREFILL: (b"#new-token", b"#cached-token"),
}
# How much of a chunk the reference path reads before the fast path is tried again.
_SLOW_PIECE_BYTES = 64 * 1024
_MARKER = {Kind.DECODE: DECODE_MARKER, Kind.PREFILL: PREFILL_MARKER}


def _number_regex(raw: bytes) -> bytes:
    if _INTEGER.fullmatch(raw):
        return rb"\d++"
    if _DECIMAL.fullmatch(raw):
        return rb"\d++\.\d++"
    return _ANY_NUMBER


class Shape:
    """A compiled regex for one exact stats-line layout: field names, order, separators, the form
    each number is printed in, and the line's tail.

    The regex matches at every occurrence of the kind's marker: a whole line of this shape from
    the marker to the end of the line, with its captured values, or else nothing, which leaves
    every value empty. So one `findall` both extracts the values and tells whether every line
    holding a marker had this shape.
    """

    __slots__ = ("bracketed", "captured", "missed", "rank_tail", "regex", "unknown_fields")

    def __init__(self, kind: Kind, line: bytes, parsed: StatsLine) -> None:
        marker = _MARKER[kind]
        head = re.search(re.escape(marker) + rb"( ?\[\d+\])?([.,]?) ", line)
        if head is None:
            raise ValueError("no stats-line head")
        prefix = line[: head.start()]
        self.bracketed = prefix.endswith(b"] ")
        # Rank part: the text between the timestamp and "] " (" TP0"), or nothing.
        inner = prefix[:-2] if self.bracketed else b""
        tail = inner[inner.rfind(b" "):] if inner else b""
        self.rank_tail = tail if _TP_RANK.match(tail) else b""
        counter = rb"(?: ?\[\d+\])?" if head.group(1) else b""
        rest = line[head.end():]
        body = rest.rstrip(b"\r").rstrip(b" ").rstrip(b",")
        line_end = rest[len(body):]  # "", ",", ", ", " ", "\r": printed the same on every line
        parts: list[bytes] = []
        captured: list[bytes] = []
        self.unknown_fields = parsed.unknown_fields
        for part in body.split(b", "):
            name, sep, raw = part.partition(b": ")
            if not sep:
                parts.append(re.escape(part))  # an unknown bare word: must stay the same text
                continue
            key = re.escape(name) + b": "
            percent = raw.endswith(b"%")
            number = _number_regex(raw[:-1] if percent else raw) + (b"%" if percent else b"")
            if name in _CAPTURED[kind]:
                parts.append(key + b"(" + number + b")")
                captured.append(name)
            elif FIELD_NAMES.get(name) in EXPORTED_FIELDS:
                parts.append(key + number)
            elif name in GRAPH_LABELS:
                parts.append(key + rb"(?:True|False)")
            else:
                parts.append(key + rb"[^,\n]*+")
        if not captured or captured[0] != _CAPTURED[kind][0]:
            raise ValueError("the required first value is missing")
        self.captured = tuple(captured)
        if self.bracketed:
            # A fixed-width look-behind checks the rank part and the 3 bytes before it, the
            # timestamp's tail (":14", "123"), so " DP1 TP0] Decode" never passes for " TP0]".
            before = inner[: len(inner) - len(self.rank_tail)][-3:]
            if len(before) != 3 or not all(c in b"0123456789:." for c in before):
                # Several rank words (DP attention, PP): the reference path reads them per line.
                raise ValueError("multi-rank prefix")
            guard = re.sub(rb"\d", rb"\\d", re.escape(before))
            behind = rb"(?<=" + guard + re.escape(self.rank_tail + b"] " + marker) + b")"
        else:
            behind = b""
        # findall returns plain strings, not tuples, for a regex with one group: an empty
        # trailing group keeps every match a tuple indexed by `captured`.
        padding = b"()" if len(captured) < 2 else b""
        whole_line = (
            behind + counter + re.escape(head.group(2)) + b" " + b", ".join(parts)
            + re.escape(line_end) + b"$" + padding
        )
        # Start at the marker itself: the engine scans for a pattern's first byte, and "D" or
        # "P" is rare in a log where " " is everywhere. The empty alternative matches where the
        # line is not of this shape, with every value empty.
        self.regex = re.compile(re.escape(marker) + b"(?:" + whole_line + b"|)", re.MULTILINE)
        # What findall returns for a marker whose line is not of this shape.
        self.missed = (b"",) * self.regex.groups
        sample = self.regex.search(line, head.start())
        if sample is None or sample.end() != len(line) or not sample.group(1):
            raise ValueError("the shape does not match the line it was learned from")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and other.regex.pattern == self.regex.pattern

    def __hash__(self) -> int:
        return hash(self.regex.pattern)

    def index(self, name: bytes) -> int:
        return self.captured.index(name) if name in self.captured else -1


class Ingestor:
    def __init__(self, state: LogState) -> None:
        self.state = state
        self._shapes: dict[Kind, Shape] = {}
        self._ranks: Ranks | None = None
        self._buckets: dict[bytes, str] = {}

    def feed(self, chunk: bytes, now: float | None = None) -> None:
        """`chunk` holds complete lines, each ending with b"\\n"."""
        if not chunk:
            return
        now = time.time() if now is None else now
        with self.state.lock:
            while chunk:
                n_lines = chunk.count(b"\n")
                if self._fast(chunk, n_lines, now):
                    self.state.lines_read += n_lines
                    return
                # Read a small piece line by line (which learns new shapes), then try the fast
                # path again on the rest, unless the piece taught nothing new: then the rest is
                # not of a learnable shape (several ranks, damaged lines) and all of it goes slow.
                learned = dict(self._shapes)
                cut = chunk.find(b"\n", _SLOW_PIECE_BYTES) + 1 or len(chunk)
                piece, chunk = chunk[:cut], chunk[cut:]
                self.state.lines_read += piece.count(b"\n")
                self._slow(piece, now)
                if self._shapes == learned:
                    self.state.lines_read += chunk.count(b"\n")
                    self._slow(chunk, now)
                    return

    # --- the reference path ----------------------------------------------------------------

    def _slow(self, chunk: bytes, now: float) -> None:
        state = self.state
        last: dict[Kind, tuple[bytes, StatsLine]] = {}
        for line in chunk.split(b"\n")[:-1]:
            result = parse_line(line)
            if result is None:
                state.lines_ignored += 1
            elif isinstance(result, Rejected):
                state.rejected[result.reason] += 1
            else:
                state.observe(result, now)
                last[result.kind] = (line, result)
        self._learn(last)

    def _learn(self, last: dict[Kind, tuple[bytes, StatsLine]]) -> None:
        ranks = {parsed.ranks for _, parsed in last.values()}
        if len(ranks) != 1:
            if last:
                self._shapes.clear()
            return
        self._ranks = ranks.pop()
        for kind, (line, parsed) in last.items():
            if len(line) > MAX_LINE_BYTES:
                self._shapes.pop(kind, None)
                continue
            try:
                self._shapes[kind] = Shape(kind, line, parsed)
            except (ValueError, re.error):
                self._shapes.pop(kind, None)

    # --- the fast path ---------------------------------------------------------------------

    def _fast(self, chunk: bytes, n_lines: int, now: float) -> bool:
        ranks = self._ranks
        if ranks is None or not chunk.isascii():
            return False
        found: dict[Kind, list[tuple[bytes, ...]]] = {}
        for kind, marker in _MARKER.items():
            if marker not in chunk:  # stops at the first occurrence: cheap
                continue
            shape = self._shapes.get(kind)
            if shape is None:
                return False
            if not shape.bracketed and b"] " + marker in chunk:
                return False  # a custom-prefix shape must not swallow default-format lines
            matches = shape.regex.findall(chunk)
            if shape.missed in matches:
                return False  # a line holding the marker is not of this shape
            found[kind] = matches
        # Every check passed: only now change state, so a fallback never counts a line twice.
        state = self.state
        n_stats = 0
        for kind, matches in found.items():
            n_stats += len(matches)
            shape = self._shapes[kind]
            last = parse_line(_last_line_containing(chunk, _MARKER[kind]))
            assert isinstance(last, StatsLine)  # it matched the shape, so it parses
            state.parsed[kind] += len(matches)
            state.unknown_fields += shape.unknown_fields * len(matches)
            if kind is Kind.DECODE:
                self._observe_decode(shape, ranks, matches)
                state.set_last(last, state.decode_series(ranks), now)
            else:
                self._observe_prefill(shape, ranks, matches, last)
        state.lines_ignored += n_lines - n_stats
        return True

    def _observe_decode(
        self, shape: Shape, ranks: Ranks, matches: list[tuple[bytes, ...]]
    ) -> None:
        state = self.state
        # Throughputs grouped by the printed #running-req (a chunk holds few distinct ones),
        # then by its concurrency bucket. A plain loop: 3.11 runs it at ~30 ns a line.
        by_running: defaultdict[bytes, list[float]] = defaultdict(list)
        running = map(itemgetter(shape.index(b"#running-req")), matches)
        throughputs = map(float, map(itemgetter(shape.index(b"gen throughput (token/s)")), matches))
        for value, throughput in zip(running, throughputs, strict=True):
            by_running[value].append(throughput)
        by_label: defaultdict[str, list[float]] = defaultdict(list)
        for value, values in by_running.items():
            label = self._buckets.get(value)
            if label is None:
                label = self._buckets[value] = concurrency_bucket(int(value))
            by_label[label] += values
        for label, values in by_label.items():
            _add(state.throughput_histogram(ranks, label), values)
        # Accept lengths are printed with two decimals: count the strings, convert the few.
        i_accept = shape.index(b"accept len")
        if i_accept >= 0:
            hist = state.decode_series(ranks).accept_length
            for text, count in Counter(map(itemgetter(i_accept), matches)).items():
                value = float(text)
                hist.counts[bisect_left(hist.bounds, value)] += count
                hist.sum += value * count

    def _observe_prefill(
        self, shape: Shape, ranks: Ranks, matches: list[tuple[bytes, ...]], last: StatsLine
    ) -> None:
        series = self.state.prefill_series(ranks)
        i_new, i_cached = shape.index(b"#new-token"), shape.index(b"#cached-token")
        series.new_tokens += sum(map(float, map(itemgetter(i_new), matches)))
        if i_cached >= 0:
            series.cached_tokens += sum(map(float, map(itemgetter(i_cached), matches)))
        if "input_throughput" in last.values:
            series.last_input_throughput = last.values["input_throughput"]


def _add(hist: Histogram, values: list[float]) -> None:
    # Sorting runs in C; then one bisect per bucket bound gives every bucket's count.
    ordered = sorted(values)
    previous = 0
    counts = hist.counts
    for index, bound in enumerate(hist.bounds):
        upto = bisect_right(ordered, bound, previous)
        counts[index] += upto - previous
        previous = upto
    counts[-1] += len(ordered) - previous
    hist.sum += sum(values)


def _last_line_containing(chunk: bytes, marker: bytes) -> bytes:
    pos = chunk.rfind(marker)
    start = chunk.rfind(b"\n", 0, pos) + 1
    return chunk[start: chunk.find(b"\n", pos)]
