"""--source file against real files: the tail -F cases of google/mtail's tailer integration tests
(rotation, truncation, partial line, deletion, permission) and fstab/grok_exporter's logrotate
matrix (create / nocreate, mv / cp / rm, copy, copytruncate).

Each decode line carries a distinct accept length, so the accept-length histogram's count says
how many windows were counted and its sum says which: a line counted twice or lost changes both.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.exporter.conftest import (
    POLL_INTERVAL,
    UNPRIVILEGED_UID,
    Exporter,
    Metrics,
    StartExporter,
)

Line = Callable[..., str]


def append(path: Path, data: str | bytes) -> None:
    """Open, append, close: how a logger that reopens per write (or `echo >>`) writes."""
    with path.open("ab") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def windows(line: Line, start: int, count: int) -> tuple[str, float]:
    """`count` decode lines with accept lengths 1.01*start.. (distinct); text and their sum."""
    values = [round(1 + (start + i) / 100, 2) for i in range(count)]
    return "".join(line(accept=v) for v in values), sum(values)


def follow(
    start_exporter: StartExporter, path: Path, *extra: str, uid: int | None = None
) -> Exporter:
    return start_exporter(
        "--source", "file", "--file", str(path), "--poll-interval", POLL_INTERVAL, *extra,
        uid=uid,
    )


def counted(n: int, total: float) -> Callable[[Metrics], bool]:
    return lambda m: m.accept_count == n and m.accept_sum == pytest.approx(total)


def assert_exactly(m: Metrics, n: int, total: float) -> None:
    assert m.decode == n
    assert m.accept_count == n
    assert m.accept_sum == pytest.approx(total)


def settle(exporter: Exporter, polls: int = 6) -> Metrics:
    """Let the exporter poll a few more times: a double count would show up by then."""
    time.sleep(float(POLL_INTERVAL) * polls)
    return exporter.metrics()


def test_starts_at_end_by_default(start_exporter: StartExporter, tmp_path: Path, line: Line):
    log = tmp_path / "sglang.log"
    old, _ = windows(line, 0, 3)
    log.write_text(old)
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    new, total = windows(line, 10, 2)
    append(log, new)
    m = exporter.wait_for(counted(2, total), "the 2 new lines")
    assert m.read == 2  # the 3 old lines were never read
    assert m.up == 1
    assert settle(exporter).decode == 2


def test_from_beginning_counts_existing_lines(
    start_exporter: StartExporter, tmp_path: Path, line: Line, noise: Callable[..., str]
):
    log = tmp_path / "sglang.log"
    old, total = windows(line, 0, 3)
    log.write_text(noise() + old)
    exporter = follow(start_exporter, log, "--from-beginning")
    m = exporter.wait_for(counted(3, total), "the 3 existing lines")
    assert m.read == 4
    assert m.value("specserve_log_lines_ignored_total") == 1
    assert m.value("specserve_decode_last_accept_length", tp="0") == pytest.approx(1.02)


# fstab/grok_exporter's logrotate matrix, as the file system sees each directive.
def _rename_create(log: Path) -> None:  # create + mv (logrotate's default)
    log.rename(log.with_suffix(".log.1"))
    log.touch()


def _copy_delete_create(log: Path) -> None:  # create + cp: copy to the backup, remove, create
    shutil.copyfile(log, log.with_suffix(".log.1"))
    log.unlink()
    log.touch()


def _delete_create(log: Path) -> None:  # create + rm: no backup kept
    log.unlink()
    log.touch()


ROTATIONS: dict[str, Callable[[Path], None]] = {
    "rename+create": _rename_create,
    "copy+delete+create": _copy_delete_create,
    "delete+create": _delete_create,
}


@pytest.mark.parametrize("rotate", list(ROTATIONS))
def test_rotation_counts_every_line_once(
    start_exporter: StartExporter, tmp_path: Path, line: Line, rotate: str
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    first, s1 = windows(line, 0, 3)
    append(log, first)
    exporter.wait_for(counted(3, s1), "the lines before rotation")
    # Written just before the rotation: the exporter may not have read them yet and must
    # still drain them from the old file, whatever the rotation did to its name.
    with log.open("ab") as old:
        tail, s2 = windows(line, 10, 2)
        old.write(tail.encode())
        old.flush()
        ROTATIONS[rotate](log)
    after, s3 = windows(line, 20, 4)
    append(log, after)
    m = exporter.wait_for(counted(9, s1 + s2 + s3), "all 9 lines across the rotation")
    assert m.reopens == 1
    assert m.up == 1
    assert_exactly(settle(exporter), 9, s1 + s2 + s3)


def test_rename_then_create_later_waits_and_reads_new_file_from_start(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    """logrotate `nocreate`: the path is gone until the server opens a new file."""
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    first, s1 = windows(line, 0, 2)
    append(log, first)
    exporter.wait_for(counted(2, s1), "the lines before rotation")
    log.rename(tmp_path / "sglang.log.1")
    body = exporter.wait_state("waiting")
    assert "removed or rotated" in body["source"]["detail"]
    assert exporter.metrics().up == 0
    # The new file gets several lines before the exporter's next look: all are new output.
    second, s2 = windows(line, 10, 3)
    append(log, second)
    m = exporter.wait_for(counted(5, s1 + s2), "the new file read from its start")
    assert m.up == 1
    assert m.reopens == 1


def test_copytruncate_counts_new_lines_and_none_twice(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    # The server keeps its O_APPEND descriptor across the truncation, as with copytruncate.
    with log.open("ab", buffering=0) as server:
        first, s1 = windows(line, 0, 5)
        server.write(first.encode())
        exporter.wait_for(counted(5, s1), "the lines before copytruncate")
        shutil.copyfile(log, tmp_path / "sglang.log.1")
        os.truncate(log, 0)
        # Fewer bytes than before: the file is shorter than what was read.
        second, s2 = windows(line, 10, 2)
        server.write(second.encode())
        m = exporter.wait_for(counted(7, s1 + s2), "the lines after copytruncate")
    assert m.reopens == 1
    assert_exactly(settle(exporter), 7, s1 + s2)


def test_copytruncate_refilled_past_the_old_offset_counts_every_new_line(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    """More bytes than before by the next poll: by size alone the file only grew (mtail's and
    grok_exporter's limit); the exporter sees the truncation by the file's first bytes."""
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    with log.open("ab", buffering=0) as server:
        first, s1 = windows(line, 0, 3)
        server.write(first.encode())
        exporter.wait_for(counted(3, s1), "the lines before copytruncate")
        shutil.copyfile(log, tmp_path / "sglang.log.1")
        second, s2 = windows(line, 10, 12)
        os.truncate(log, 0)
        server.write(second.encode())  # one write, microseconds after the truncation
        m = exporter.wait_for(counted(15, s1 + s2), "all 12 lines after copytruncate")
    assert m.reopens == 1
    assert_exactly(settle(exporter), 15, s1 + s2)


def test_copy_leaves_original_alone(start_exporter: StartExporter, tmp_path: Path, line: Line):
    """logrotate `copy`: a backup appears next to the file, which keeps growing."""
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    first, s1 = windows(line, 0, 3)
    append(log, first)
    exporter.wait_for(counted(3, s1), "the lines before the copy")
    shutil.copyfile(log, tmp_path / "sglang.log.1")
    second, s2 = windows(line, 10, 2)
    append(log, second)
    m = exporter.wait_for(counted(5, s1 + s2), "the lines after the copy")
    assert m.reopens == 0
    assert_exactly(settle(exporter), 5, s1 + s2)


def test_truncation_then_shorter_content(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    first, s1 = windows(line, 0, 4)
    append(log, first)
    exporter.wait_for(counted(4, s1), "the lines before truncation")
    with log.open("wb") as f:  # `: > file` followed by a shorter write
        second, s2 = windows(line, 10, 1)
        f.write(second.encode())
    m = exporter.wait_for(counted(5, s1 + s2), "the line after truncation")
    assert m.reopens == 1
    assert_exactly(settle(exporter), 5, s1 + s2)


def test_missing_at_start_then_created(start_exporter: StartExporter, tmp_path: Path, line: Line):
    log = tmp_path / "later.log"
    exporter = follow(start_exporter, log)
    # "starting" until the tailer's first look at the path (CI caught it there once, loaded).
    exporter.wait_state("waiting")
    status, body = exporter.healthz()
    assert (status, body["source"]["state"]) == (200, "waiting")  # normal during a deploy
    assert "does not exist" in body["source"]["detail"]
    m = exporter.metrics()
    assert m.up == 0
    assert m.has("specserve_source_up", source="file")
    text, total = windows(line, 0, 3)
    log.write_text(text)
    m = exporter.wait_for(counted(3, total), "the lines of the file created after start")
    assert m.up == 1
    assert exporter.state() == "following"


def test_deleted_then_recreated(start_exporter: StartExporter, tmp_path: Path, line: Line):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    first, s1 = windows(line, 0, 2)
    append(log, first)
    exporter.wait_for(counted(2, s1), "the lines before deletion")
    log.unlink()
    exporter.wait_state("waiting")
    assert exporter.metrics().up == 0
    second, s2 = windows(line, 10, 2)
    log.write_text(second)
    m = exporter.wait_for(counted(4, s1 + s2), "the recreated file's lines")
    assert m.up == 1
    assert m.reopens == 1


def test_partial_line_waits_for_its_newline(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    full = line(accept=3.33, running=7)
    append(log, full[:80])
    m = settle(exporter, polls=8)
    assert (m.read, m.decode) == (0, 0)
    append(log, full[80:])
    m = exporter.wait_for(lambda m: m.decode == 1, "the completed line")
    assert m.read == 1
    assert m.value("specserve_decode_last_accept_length") == pytest.approx(3.33)
    assert m.value("specserve_decode_running_requests") == 7
    assert settle(exporter).decode == 1


def test_crlf_line_endings(start_exporter: StartExporter, tmp_path: Path, line: Line):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    append(log, line(accept=2.5, queue=3, newline="\r\n") + line(accept=2.75, queue=4,
                                                                   newline="\r\n"))
    m = exporter.wait_for(counted(2, 5.25), "two CRLF lines")
    assert m.value("specserve_log_lines_rejected_total") == 0
    assert m.value("specserve_decode_queued_requests") == 4  # "4\r" read as 4
    assert m.value("specserve_decode_last_accept_length") == pytest.approx(2.75)


def test_invalid_utf8_is_counted_never_fatal(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    bad_decode = line(accept=2.0).replace("#token: 671", "#token: 6\udcff71")
    append(log, b"[2026-02-23 17:53:15] WARNING \xff\xfe garbage from a crashed writer\n")
    append(log, bad_decode.encode("utf-8", "surrogateescape"))
    append(log, line(accept=2.5))
    m = exporter.wait_for(lambda m: m.decode == 1 and m.read == 3, "all three lines")
    assert m.value("specserve_log_lines_ignored_total") == 1
    assert m.value("specserve_log_lines_rejected_total", reason="invalid_utf8") == 1
    assert m.accept_sum == pytest.approx(2.5)
    status, body = exporter.healthz()
    assert (status, body["source"]["state"]) == (200, "following")


def _rss_kib(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    raise AssertionError("no VmRSS")


def test_huge_line_without_newline_keeps_memory_bounded(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    before = _rss_kib(exporter.proc.pid)
    read_before = _read_bytes(exporter.proc.pid)
    head = "[2026-02-23 17:53:14 TP0] Decode batch, #running-req: 1, #token: "
    chunk = b"9" * (4 * 1024 * 1024)
    with log.open("ab") as f:
        f.write(head.encode())
        for _ in range(16):  # 64 MiB, no newline
            f.write(chunk)
    # Once the exporter has read all 64 MiB, check that it did not keep them.
    exporter.wait_until(
        lambda: _read_bytes(exporter.proc.pid) - read_before >= 64 * 1024 * 1024,
        timeout=15, what="the exporter to read the 64 MiB line",
    )
    exporter.assert_alive()
    grown_mib = (_rss_kib(exporter.proc.pid) - before) / 1024
    assert grown_mib < 32, f"RSS grew {grown_mib:.0f} MiB while a 64 MiB line was pending"
    append(log, "\n" + line(accept=4.5))
    m = exporter.wait_for(lambda m: m.decode == 1, "the decode line after the huge one")
    assert m.read == 2
    assert m.value("specserve_log_lines_rejected_total", reason="too_long") == 1
    assert m.accept_sum == pytest.approx(4.5)
    assert exporter.state() == "following"


def _read_bytes(pid: int) -> int:
    for row in Path(f"/proc/{pid}/io").read_text().splitlines():
        if row.startswith("rchar:"):
            return int(row.split()[1])
    return 0


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the unprivileged user can enter (pytest's tmp_path is root-only, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="specserve-perm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_permission_denied_reports_error_then_recovers(
    start_exporter: StartExporter, shared_dir: Path, line: Line
):
    log = shared_dir / "sglang.log"
    log.write_text(line(accept=1.5))
    log.chmod(0o000)
    uid = UNPRIVILEGED_UID if os.geteuid() == 0 else None  # root would read mode 000 anyway
    exporter = follow(start_exporter, log, uid=uid)
    body = exporter.wait_state("error")
    status, body = exporter.healthz()
    assert status == 503
    assert body["status"] == "error"
    detail = body["source"]["detail"]
    assert "permission denied" in detail and str(log) in detail
    assert "give the exporter's user read access" in detail  # the fix
    assert exporter.metrics().up == 0
    # Written after the exporter started, while it could not read: new output, not to be lost.
    append(log, line(accept=2.5))
    log.chmod(0o644)
    exporter.wait_state("following")
    assert exporter.healthz()[0] == 200
    append(log, line(accept=3.25))
    m = exporter.wait_for(lambda m: m.decode == 2, "the lines written after start")
    assert m.accept_sum == pytest.approx(2.5 + 3.25)  # not the 1.5 from before the start
    assert m.up == 1


def test_line_appears_in_metrics_within_one_second(
    start_exporter: StartExporter, tmp_path: Path, line: Line
):
    log = tmp_path / "sglang.log"
    log.touch()
    exporter = follow(start_exporter, log)
    exporter.wait_state("following")
    for accept in (2.25, 3.5):
        written = time.monotonic()
        append(log, line(accept=accept))
        exporter.wait_for(
            lambda m, a=accept: m.value("specserve_decode_last_accept_length") == a,
            f"accept len {accept}", timeout=1.0,
        )
        assert time.monotonic() - written < 1.0
