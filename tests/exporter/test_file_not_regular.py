"""A log path that is not a regular file (issue 26 item 5): a directory killed the source thread
("source thread died; exiting", so the deployed exporter crash-looped), a FIFO blocked it in
open() and a symlink to /dev/zero spun a core, the last two with specserve_source_up 1. Each
is now an error with a reason (specserve_source_errors_total{reason}), source_up 0 and /healthz
503, retried every poll interval, and a regular file at the path is followed again.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from specserve_exporter.sources import base
from specserve_exporter.sources import file as file_source
from specserve_exporter.sources.base import SourceState
from specserve_exporter.sources.file import FileSource
from tests.exporter.conftest import POLL_INTERVAL, Exporter, StartExporter
from tests.exporter.test_copytruncate import Sink, ids, numbered
from tests.exporter.test_file_source import _read_bytes, append

# What one poll may take, worst case, on a loaded 2-core machine: a poll that blocks or spins
# never returns at all.
POLL_DEADLINE_S = 10.0


def poll_within_deadline(source: FileSource) -> None:
    """One poll in a thread: fail (instead of hanging the suite) if it blocks or spins."""
    errors: list[BaseException] = []

    def poll() -> None:
        try:
            source.poll_once()
        except BaseException as exc:  # the assertion below reports it
            errors.append(exc)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    thread.join(POLL_DEADLINE_S)
    assert not thread.is_alive(), "the poll blocked or spun instead of returning"
    assert not errors, f"the poll raised {errors[0]!r}: the source thread would die"


def in_error(source: FileSource, reason: str) -> str:
    report = source.status()
    assert report.state is SourceState.ERROR, report
    assert not source.is_up()
    assert source.errors()[base.ErrorReason(reason)] == 1
    return report.detail


def release_fifo_reader(fifo: Path) -> None:
    """A reader blocked in open() of a FIFO goes on once a writer opens it."""
    with contextlib.suppress(OSError):  # ENXIO: no reader waiting, nothing to release
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_directory_at_the_path_is_an_error_then_a_file_is_followed(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.mkdir()
    sink = Sink()
    source = FileSource(log, sink, from_beginning=True)
    poll_within_deadline(source)
    detail = in_error(source, "directory")
    assert detail == (f"{log} is a directory, not a regular file: point --file at the server's "
                      "log file (retrying)")
    poll_within_deadline(source)
    assert source.errors()[base.ErrorReason.DIRECTORY] == 1, "one episode, not one count per poll"
    log.rmdir()
    log.write_bytes(numbered(0, 3))
    poll_within_deadline(source)
    assert source.is_up()
    assert ids(sink.lines) == [0, 1, 2]


def test_a_fifo_at_the_path_does_not_block(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    os.mkfifo(log)
    source = FileSource(log, Sink(), from_beginning=True)
    try:
        poll_within_deadline(source)
    finally:
        release_fifo_reader(log)
    in_error(source, "fifo")


def test_a_fifo_swapped_in_between_stat_and_open_does_not_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The type is checked before the open, and the open itself cannot block: O_NONBLOCK, then
    fstat() of what was opened."""
    log = tmp_path / "sglang.log"
    log.write_bytes(numbered(0, 2))
    real_stat, swapped = os.stat, []

    def stat_then_swap(path: object, *args: object, **kwargs: object) -> os.stat_result:
        result = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]
        if not swapped and str(path) == str(log):
            swapped.append(True)
            log.unlink()
            os.mkfifo(log)  # lands after the check, before the open
        return result

    source = FileSource(log, Sink(), from_beginning=True)
    monkeypatch.setattr(file_source.os, "stat", stat_then_swap)
    try:
        poll_within_deadline(source)
        poll_within_deadline(source)  # a FIFO now, whoever looked first
    finally:
        monkeypatch.undo()
        release_fifo_reader(log)
    in_error(source, "fifo")


def test_a_symlink_to_a_device_is_an_error_not_endless_reading(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    os.symlink("/dev/null", log)  # a device that ends at once: the old code read it "fine"
    source = FileSource(log, Sink(), from_beginning=True)
    poll_within_deadline(source)
    assert "is a device, not a regular file" in in_error(source, "device")


def test_rotated_to_a_directory_while_following(tmp_path: Path) -> None:
    """Renamed away and a directory created in its place: the old file is read to its end,
    then the directory is an error, not a crash."""
    log = tmp_path / "sglang.log"
    log.write_bytes(numbered(0, 2))
    sink = Sink()
    source = FileSource(log, sink, from_beginning=True)
    poll_within_deadline(source)
    append(log, numbered(2, 2))
    log.rename(tmp_path / "sglang.log.1")
    log.mkdir()
    poll_within_deadline(source)
    assert ids(sink.lines) == [0, 1, 2, 3]
    in_error(source, "directory")


# --- the real exporter ---------------------------------------------------------------------


def follow(start_exporter: StartExporter, log: Path) -> Exporter:
    return start_exporter(
        "--source", "file", "--file", str(log), "--poll-interval", POLL_INTERVAL,
    )


def assert_error(exporter: Exporter, reason: str) -> None:
    body = exporter.wait_state("error")
    assert "not a regular file" in body["source"]["detail"]
    assert exporter.healthz()[0] == 503
    m = exporter.metrics()
    assert m.up == 0
    assert m.value("specserve_source_errors_total", source="file", reason=reason) == 1
    assert m.value("specserve_source_errors_total") == 1, "one reason, one episode"


def test_exporter_survives_a_directory_at_the_path(
    start_exporter: StartExporter, tmp_path: Path, line
) -> None:
    log = tmp_path / "sglang.log"
    log.mkdir()
    exporter = follow(start_exporter, log)
    assert_error(exporter, "directory")
    log.rmdir()
    log.touch()
    exporter.wait_state("following")
    append(log, line(accept=2.5))
    m = exporter.wait_for(lambda m: m.decode == 1, "the line written once it is a file")
    assert m.up == 1


def test_exporter_is_not_blocked_by_a_fifo_swapped_in(
    start_exporter: StartExporter, tmp_path: Path, line
) -> None:
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    try:
        log.rename(tmp_path / "sglang.log.1")
        os.mkfifo(log)
        assert_error(exporter, "fifo")
    finally:
        release_fifo_reader(log)
    log.unlink()
    log.touch()
    exporter.wait_state("following")
    append(log, line(accept=3.5))
    exporter.wait_for(lambda m: m.decode == 1 and m.up == 1, "the line after the FIFO")


def test_exporter_does_not_spin_on_a_symlink_to_dev_zero(
    start_exporter: StartExporter, tmp_path: Path
) -> None:
    log = tmp_path / "sglang.log"
    os.symlink("/dev/zero", log)
    exporter = follow(start_exporter, log)
    assert_error(exporter, "device")
    read_before = _read_bytes(exporter.proc.pid)
    time.sleep(20 * float(POLL_INTERVAL))  # 20 polls: reading /dev/zero would be gigabytes
    assert _read_bytes(exporter.proc.pid) - read_before < 1024 * 1024
    assert exporter.metrics().up == 0
