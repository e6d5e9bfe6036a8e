"""Turn chunks of complete log lines into state updates, fast.

The reference parser (parser.py) reads one line at a time. Most of an SGLang log is stats lines of
one layout printed by one rank, so for a chunk whose stats lines all share the layout ("shape",
shape.py) and rank of the last ones parsed, the chunk scanner (_scan.c) reads every stats line of
the chunk in one call and returns the histograms and sums the metrics need. Gauges only show the
last window, so they are set from the chunk's last line through the reference parser. Anything
else (a new shape, several ranks, non-ASCII bytes, a line not of the shape) takes the reference
parser for that chunk, which also learns the new shapes. Property tests keep the two paths equal.
"""

from __future__ import annotations

import re
import time

from specserve.buckets import concurrency_bucket

from .histogram import ACCEPT_LENGTH_BUCKETS, THROUGHPUT_BUCKETS
from .parser import (
    MAX_LINE_BYTES,
    Kind,
    Ranks,
    Rejected,
    StatsLine,
    parse_line,
)
from .shape import MARKERS, HistogramSpec, Scanned, Shape
from .state import LogState

# How much of a chunk the reference path reads before the fast path is tried again.
_SLOW_PIECE_BYTES = 64 * 1024
_THROUGHPUT = HistogramSpec(b"gen throughput (token/s)", b"#running-req", THROUGHPUT_BUCKETS)
_ACCEPT_LENGTH = HistogramSpec(b"accept len", None, ACCEPT_LENGTH_BUCKETS)
_NEW_TOKENS = HistogramSpec(b"#new-token", None, ())
_CACHED_TOKENS = HistogramSpec(b"#cached-token", None, ())
_DECODE_HISTOGRAMS = (_THROUGHPUT, _ACCEPT_LENGTH)
_PREFILL_HISTOGRAMS = (_NEW_TOKENS, _CACHED_TOKENS)  # sums only: no bounds
# The line specserve-launch's tee writes into the log file when the file comes back after it
# could not be written (specserve/profile/logtee.py GAP_MARKER): lines the exporter never saw.
LOG_GAP_MARKER = b"specserve-launch: log file unavailable from "
_LOG_GAP = re.compile(
    rb"^" + re.escape(LOG_GAP_MARKER) + rb"\S+ to \S+, (\d+) bytes not written", re.MULTILINE
)


class Ingestor:
    def __init__(self, state: LogState) -> None:
        self.state = state
        self._shapes: dict[Kind, Shape] = {}
        self._ranks: Ranks | None = None
        self._buckets: dict[int, str] = {}

    def feed(self, chunk: bytes, now: float | None = None) -> None:
        """`chunk` holds complete lines, each ending with b"\\n"."""
        if not chunk:
            return
        now = time.time() if now is None else now
        with self.state.lock:
            if LOG_GAP_MARKER in chunk:  # rare: a substring test keeps the common chunk cheap
                for gap in _LOG_GAP.finditer(chunk):
                    self.state.log_file_gaps += 1
                    self.state.log_file_gap_bytes += int(gap.group(1))
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
            except ValueError:  # not a layout the scanner can hold: the reference path reads it
                self._shapes.pop(kind, None)

    # --- the fast path ---------------------------------------------------------------------

    def _fast(self, chunk: bytes, n_lines: int, now: float) -> bool:
        ranks = self._ranks
        if ranks is None or not chunk.isascii():
            return False
        found: dict[Kind, tuple[Shape, Scanned]] = {}
        for kind, marker in MARKERS.items():
            if marker not in chunk:  # stops at the first occurrence: cheap
                continue
            shape = self._shapes.get(kind)
            if shape is None:
                return False
            if not shape.bracketed and b"] " + marker in chunk:
                return False  # a custom-prefix shape must not swallow default-format lines
            wanted = _DECODE_HISTOGRAMS if kind is Kind.DECODE else _PREFILL_HISTOGRAMS
            scanned = shape.scan(chunk, wanted)
            if scanned is None:
                return False  # a line holding the marker is not of this shape
            found[kind] = (shape, scanned)
        # Every check passed: only now change state, so a fallback never counts a line twice.
        state = self.state
        n_stats = 0
        for kind, (shape, scanned) in found.items():
            n_stats += scanned.lines
            last = parse_line(_last_line_containing(chunk, MARKERS[kind]))
            assert isinstance(last, StatsLine)  # it matched the shape, so it parses
            state.parsed[kind] += scanned.lines
            state.unknown_fields += shape.unknown_fields * scanned.lines
            sums = scanned.histograms
            if kind is Kind.DECODE:
                for running, (counts, total) in sums[_THROUGHPUT.value].items():
                    label = self._buckets.get(running)
                    if label is None:
                        label = self._buckets[running] = concurrency_bucket(running)
                    state.throughput_histogram(ranks, label).merge(counts, total)
                for counts, total in sums.get(_ACCEPT_LENGTH.value, {}).values():
                    state.decode_series(ranks).accept_length.merge(counts, total)
                state.set_last(last, state.decode_series(ranks), now)
            else:
                series = state.prefill_series(ranks)
                series.new_tokens += sum(total for _, total in sums[_NEW_TOKENS.value].values())
                series.cached_tokens += sum(
                    total for _, total in sums.get(_CACHED_TOKENS.value, {}).values())
                if "input_throughput" in last.values:
                    series.last_input_throughput = last.values["input_throughput"]
        state.lines_ignored += n_lines - n_stats
        return True


def _last_line_containing(chunk: bytes, marker: bytes) -> bytes:
    pos = chunk.rfind(marker)
    start = chunk.rfind(b"\n", 0, pos) + 1
    return chunk[start: chunk.find(b"\n", pos)]
