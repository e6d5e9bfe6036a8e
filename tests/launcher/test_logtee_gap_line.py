"""The gap marker starts a line of its own (issue 26 item 5). When the log disk fills, the write
in flight is cut short mid-line; the marker the tee wrote once space came back was glued to that
fragment, so the exporter (which counts a marker only at a line's start, a server line quoting
it must not count) saw no gap and specserve_log_file_gaps_total stayed 0: the gap alert could
not fire. The tee now ends such a line before it writes anything else into the file.

Two ways to a write cut short: the kernel's own (a file size limit, RLIMIT_FSIZE, in a child
process: the write that crosses it writes up to the limit, the next one fails with EFBIG, as a
full disk does with ENOSPC), and a simulated ENOSPC after a short writev. The exporter's count
is read from the real `specserve-exporter --once` over the file.
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from specserve.launch import logtee
from specserve.launch.logtee import GAP_MARKER, Tee
from tests.exporter.conftest import clean_env, exporter_binary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logtee, "CHECK_S", 0.0)
    monkeypatch.setattr(logtee, "RETRY_MIN_S", 0.0)


def exporter_counts(log: Path) -> dict[str, float]:
    """specserve-exporter --once over `log`: its gap counters and lines read."""
    result = subprocess.run(
        [exporter_binary(), "--source", "file", "--file", str(log), "--once"],
        capture_output=True, text=True, timeout=60, env=clean_env(), check=False,
    )
    assert result.returncode == 0, result.stderr
    wanted = ("specserve_log_file_gaps_total", "specserve_log_file_gap_bytes_total",
              "specserve_log_lines_read_total")
    return {
        s.name: s.value
        for family in text_string_to_metric_families(result.stdout)
        for s in family.samples
        if s.name in wanted
    }


def marker_lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if GAP_MARKER.encode() in line]


CHILD = textwrap.dedent("""
    import os, resource, signal, sys
    from pathlib import Path
    from specserve.launch import logtee

    log, limit = Path(sys.argv[1]), int(sys.argv[2])
    logtee.RETRY_MIN_S = 0.0
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
    with open(os.devnull, "wb") as sink:
        tee = logtee.Tee(sink, log, 10_000_000, 3)
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))  # the disk is this big
        for i in range(100):
            tee.feed(b"[2026-12-01 10:00:00] line %04d before the disk filled\\n" % i)
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
        for i in range(5):
            tee.feed(b"[2026-12-01 10:05:00] line %04d after\\n" % i)
        tee.close()
""")


def test_a_write_cut_short_by_the_kernel_leaves_the_marker_on_its_own_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "sglang.log"
    line = len(b"[2026-12-01 10:00:00] line 0000 before the disk filled\n")
    limit = 10 * line + 33  # full in the middle of line 10
    subprocess.run(
        [sys.executable, "-c", CHILD, str(log), str(limit)], check=True, timeout=60,
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    data = log.read_bytes()
    lines = data.split(b"\n")
    assert lines[10] == b"[2026-12-01 10:00:00] line 0010 b", "the kernel's short write"
    (marker,) = marker_lines(data)
    assert marker.startswith(GAP_MARKER.encode()), f"glued to the fragment: {marker!r}"
    assert b"EFBIG" in marker
    assert lines[-6:-1] == [b"[2026-12-01 10:05:00] line %04d after" % i for i in range(5)]
    lost = 100 * line - limit
    counts = exporter_counts(log)
    assert counts["specserve_log_file_gaps_total"] == 1
    assert counts["specserve_log_file_gap_bytes_total"] == lost
    # Every line there is read once: 10 whole, the fragment, the marker, the 5 after.
    assert counts["specserve_log_lines_read_total"] == 17


class FullDisk:
    """os.writev / os.write as a disk that fills: one write cut short mid-way, then ENOSPC on
    every write until `full` is cleared."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        self.cut = False
        self._writev, self._write = os.writev, os.write
        monkeypatch.setattr(logtee.os, "writev", self.writev)
        monkeypatch.setattr(logtee.os, "write", self.write)

    def writev(self, fd: int, buffers: list[memoryview]) -> int:
        if self.full:
            return self._short(fd, b"".join(bytes(b) for b in buffers))
        return self._writev(fd, buffers)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self.full and fd > 2:
            return self._short(fd, bytes(data))
        return self._write(fd, data)

    def _short(self, fd: int, data: bytes) -> int:
        if not self.cut and len(data) > 1:
            self.cut = True
            return self._write(fd, data[: len(data) // 2])  # the last blocks the disk had
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_enospc_after_a_short_write_leaves_the_marker_on_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "sglang.log"
    tee = Tee(io.BytesIO(), log, 10_000_000, 3)
    disk = FullDisk(monkeypatch)
    tee.feed(b"line 0000 written whole\n")
    disk.full = True
    tee.feed(b"line 0001 cut in the middle\n")  # half of it reaches the disk
    tee.feed(b"line 0002 lost\n")
    assert tee.file is not None and tee.file.outage is not None
    disk.full = False
    tee.feed(b"line 0003 after\n")
    tee.close()
    assert disk.cut
    data = log.read_bytes()
    lines = data.split(b"\n")
    assert lines[:2] == [b"line 0000 written whole", b"line 0001 cut "]
    assert lines[2].startswith(GAP_MARKER.encode()), f"glued to the fragment: {lines[1:3]!r}"
    assert b"ENOSPC" in lines[2]
    assert lines[3:] == [b"line 0003 after", b""]
    counts = exporter_counts(log)
    assert counts["specserve_log_file_gaps_total"] == 1
    assert counts["specserve_log_file_gap_bytes_total"] == len(
        b"in the middle\nline 0002 lost\n")


def test_a_file_left_mid_line_gets_its_line_ended_before_the_first_line(tmp_path: Path) -> None:
    """A launcher restarted on a log whose last line was cut (the disk filled, the old process
    was killed mid-write): the new server's first line starts a line of its own."""
    log = tmp_path / "sglang.log"
    log.write_bytes(b"[2026-12-01 10:00:00] old line\n[2026-12-01 10:00:01] cut li")
    tee = Tee(io.BytesIO(), log, 10_000_000, 3)
    tee.feed(b"[2026-12-01 11:00:00] new server\n")
    tee.close()
    assert log.read_bytes().split(b"\n") == [
        b"[2026-12-01 10:00:00] old line", b"[2026-12-01 10:00:01] cut li",
        b"[2026-12-01 11:00:00] new server", b"",
    ]
    # And a file that ends with its newline gets no empty line.
    tee = Tee(io.BytesIO(), log, 10_000_000, 3)
    tee.feed(b"[2026-12-01 12:00:00] third\n")
    tee.close()
    assert log.read_bytes().endswith(b"new server\n[2026-12-01 12:00:00] third\n")
