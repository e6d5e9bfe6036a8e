"""What a path read from one kind of stats line printed by one rank: a Window.

Both paths build Windows and hand them to `LogState.observe`, the one place the state changes. The
fast path makes one from the chunk scanner's sums and the chunk's last line (`Window.scanned`);
the reference path folds the lines it parsed into one (`WindowReader`), summing each EVERY_LINE
feed as the scanner does: by the integer value of the feed's key field (0 when unkeyed), into the
feed's buckets (+Inf last).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fields import LINE_KINDS, Feed, Kind, Read, Value, every_line
from .histogram import Histogram
from .parser import Ranks, StatsLine

# Per key: the count in each bucket, +Inf last, and the sum.
Sums = dict[int, tuple[list[int], float]]

# The numbers a LAST_PRINTED gauge keeps, by kind (a graph state is kept as Window.graph).
_LAST_PRINTED: dict[Kind, tuple[str, ...]] = {
    kind: tuple(dict.fromkeys(
        f.field.name for f in line_kind.feeds
        if f.read is Read.LAST_PRINTED and f.field.value is Value.NUMBER))
    for kind, line_kind in LINE_KINDS.items()
}


@dataclass(slots=True)
class Window:
    kind: Kind
    ranks: Ranks
    lines: int = 0
    unknown_fields: int = 0
    sums: dict[Feed, Sums] = field(default_factory=dict)  # the kind's EVERY_LINE feeds
    last: StatsLine | None = None  # the last line: LAST_LINE gauges
    printed: dict[str, float] = field(default_factory=dict)  # LAST_PRINTED numbers
    graph: tuple[str, bool] | None = None  # the last graph state printed

    @classmethod
    def scanned(cls, kind: Kind, ranks: Ranks, lines: int, unknown_fields: int,
                sums: dict[Feed, Sums], last: StatsLine) -> Window:
        """The fast path's window: every line of one shape, `last` parsed in full."""
        window = cls(kind, ranks, lines, unknown_fields, sums)
        window.end_with(last)
        return window

    def end_with(self, line: StatsLine) -> None:
        """`line` is the window's latest: the gauges take its values."""
        self.last = line
        values = line.values
        for name in _LAST_PRINTED[self.kind]:
            if name in values:
                self.printed[name] = values[name]
        if line.graph is not None and line.graph_on is not None:
            self.graph = (line.graph, line.graph_on)


class WindowReader:
    """The reference path's windows: parsed lines folded one at a time, by kind and rank."""

    __slots__ = ("_histograms", "_windows")

    def __init__(self) -> None:
        self._windows: dict[tuple[Kind, Ranks], Window] = {}
        self._histograms: dict[tuple[Kind, Ranks], list[tuple[Feed, dict[int, Histogram]]]] = {}

    def add(self, line: StatsLine) -> None:
        at = (line.kind, line.ranks)
        window = self._windows.get(at)
        if window is None:
            window = self._windows[at] = Window(line.kind, line.ranks)
            self._histograms[at] = [(feed, {}) for feed in every_line(line.kind)]
        window.lines += 1
        window.unknown_fields += line.unknown_fields
        values = line.values
        for feed, by_key in self._histograms[at]:
            value = values.get(feed.field.name)
            if value is None:
                continue
            key = 0
            if feed.key is not None:
                key_value = values.get(feed.key.name)
                if key_value is None:
                    continue
                key = int(key_value)  # truncates, as the scanner does
            hist = by_key.get(key)
            if hist is None:
                hist = by_key[key] = Histogram(feed.bounds)
            hist.observe(value)
        window.end_with(line)

    def windows(self) -> list[Window]:
        """The windows read so far, each with its sums; the reader starts empty again."""
        out = list(self._windows.values())
        for at, window in self._windows.items():
            window.sums = {
                feed: {key: (h.counts, h.sum) for key, h in by_key.items()}
                for feed, by_key in self._histograms[at] if by_key
            }
        self._windows = {}
        self._histograms = {}
        return out
