"""A truncation that keeps the file's first bytes (`truncate -s 5000` of a bigger file, issue 26
item 5) is a truncation: the reader noticed truncation only by the first KiB, which such a cut
keeps, so it went on waiting at its old offset and lost everything the server wrote until the
file grew past it again (19,915 of 51,000 lines in the adversarial run).

In-process (FileSource and a list sink), so each interleaving is exact; lines are numbered, so a
line lost, read twice or cut is visible by its number. The real exporter's case is the last test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specserve_exporter.sources.file import FINGERPRINT_SIZE, FileSource
from tests.exporter.conftest import POLL_INTERVAL, StartExporter
from tests.exporter.test_copytruncate import Sink, Writer, follow, ids, numbered


def mid_line_cut(data: bytes, at_least: int) -> int:
    """A byte position past `at_least` in the middle of a line, as `truncate -s N` cuts."""
    start = data.index(b"\n", at_least) + 1
    return start + 7


def test_cut_below_the_offset_keeping_the_first_kib_is_noticed(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    writer = Writer(log)
    source, sink = follow(log)
    old = numbered(0, 2000)
    writer.write(old)
    source.poll_once()
    assert ids(sink.lines) == list(range(2000))
    cut = mid_line_cut(old, 5000)
    assert FINGERPRINT_SIZE < cut < len(old)
    os.truncate(log, cut)  # the first KiB is the same as before, the file is shorter
    source.poll_once()
    assert source.reopens() == 1, "the cut counts as a truncation"
    writer.write(numbered(10_000, 300))  # the server goes on appending after the kept bytes
    source.poll_once()
    source.poll_once()
    # Every new line, whole and once; the kept 5 KB are not counted again.
    assert ids(sink.lines) == [*range(2000), *range(10_000, 10_300)]
    assert source.reopens() == 1
    writer.close()


def test_cut_then_written_before_the_next_poll_loses_at_most_those_lines(
    tmp_path: Path,
) -> None:
    """Where the cut was is not known once the writer has appended after it, so what it wrote
    between the cut and the poll that notices it may be lost; never more, never twice."""
    log = tmp_path / "sglang.log"
    writer = Writer(log)
    source, sink = follow(log)
    old = numbered(0, 3000)
    writer.write(old)
    source.poll_once()
    os.truncate(log, mid_line_cut(old, 8000))
    writer.write(numbered(10_000, 20))  # before the poll: the file is still shorter than read
    source.poll_once()
    writer.write(numbered(20_000, 500))  # after it
    source.poll_once()
    got = ids(sink.lines)
    assert len(got) == len(set(got)), "a line counted twice"
    assert got[:3000] == list(range(3000))
    assert got[-500:] == list(range(20_000, 20_500)), "a line written after the poll was lost"
    assert set(got[3000:-500]) <= set(range(10_000, 10_020))
    writer.close()


def test_cut_and_refilled_past_the_offset_before_the_next_poll_is_noticed(
    tmp_path: Path,
) -> None:
    """Shorter than the offset no more by the time of the poll: size alone cannot see it, the
    bytes just before the offset can. The old code read on from its offset, in the middle of
    the new content: a cut line, and everything before it skipped."""
    log = tmp_path / "sglang.log"
    writer = Writer(log)
    source, sink = follow(log)
    old = numbered(0, 2000)
    writer.write(old)
    source.poll_once()
    cut = mid_line_cut(old, len(old) - 3000)
    os.truncate(log, cut)
    writer.write(numbered(10_000, 100))  # far more than the 3 KB cut: past the old offset
    assert log.stat().st_size > len(old)
    source.poll_once()
    assert source.reopens() == 1
    writer.write(numbered(20_000, 50))
    source.poll_once()
    lines = sink.lines
    assert all(line.startswith(b"[2026-02-23 17:53:14 TP0] Decode batch") for line in lines), (
        "a line cut in the middle reached the sink"
    )
    got = ids(lines)
    assert got[:2000] == list(range(2000)) and got[-50:] == list(range(20_000, 20_050))
    assert len(got) == len(set(got))
    writer.close()


def test_cut_below_an_offset_taken_at_start_is_noticed(tmp_path: Path) -> None:
    """Started at the end of a file it never read: the bytes before the offset are taken from
    the file at open, so a cut below it is seen all the same."""
    log = tmp_path / "sglang.log"
    writer = Writer(log)
    old = numbered(0, 2000)
    writer.write(old)
    sink = Sink()
    source = FileSource(log, sink)
    source.poll_once()
    assert sink.lines == []
    os.truncate(log, mid_line_cut(old, 5000))
    source.poll_once()
    writer.write(numbered(10_000, 40))
    source.poll_once()
    assert ids(sink.lines) == list(range(10_000, 10_040))
    writer.close()


def test_the_exporter_counts_every_line_after_truncate_s(
    start_exporter: StartExporter, tmp_path: Path, line
) -> None:
    """The adversarial case end to end: a big file, `truncate -s 5000`, the server goes on."""
    log = tmp_path / "sglang.log"
    before = "".join(line(accept=1.5) for _ in range(3000))
    log.write_text(before)
    exporter = start_exporter(
        "--source", "file", "--file", str(log), "--poll-interval", POLL_INTERVAL,
        "--from-beginning",
    )
    exporter.wait_for(lambda m: m.decode == 3000, "the 3000 lines there at start")
    os.truncate(log, 5000)
    exporter.wait_for(lambda m: m.reopens == 1, "the cut counted as a truncation")
    values = [round(2 + i / 1000, 3) for i in range(400)]
    with log.open("ab") as out:
        for value in values:
            out.write(line(accept=value).encode())
    m = exporter.wait_for(lambda m: m.decode == 3400, "the 400 lines written after the cut")
    assert m.accept_sum == pytest.approx(3000 * 1.5 + sum(values))
    assert m.reopens == 1
