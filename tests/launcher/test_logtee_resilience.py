"""The tee never goes quiet (issue 16 item 6): a deleted or replaced log file is reopened, an
unwritable one is retried while stdout keeps every line, and the file says what it missed."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

from specserve.launch import logtee
from specserve.launch.logtee import GAP_MARKER, REOPEN_MARKER, Tee

KEY = "sk-resilience-0123456789"
GAP = re.compile(
    r"^specserve-launch: log file unavailable from (\S+Z) to (\S+Z), (\d+) bytes not written "
    r"\((\w+): [^)]*\)$",
    re.MULTILINE,
)


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> None:
    # Check the path's identity on every line and retry a failed file at once: the tests drive
    # the tee line by line instead of waiting out the production intervals.
    monkeypatch.setattr(logtee, "CHECK_S", 0.0)
    monkeypatch.setattr(logtee, "RETRY_MIN_S", 0.0)


def _tee(path: Path, secrets: tuple[str, ...] = ()) -> tuple[Tee, io.BytesIO]:
    sink = io.BytesIO()
    return Tee(sink, path, 10_000_000, 3, secrets), sink


def _lines(tee: Tee, start: int, stop: int) -> bytes:
    data = b"".join(b"line %04d\n" % i for i in range(start, stop))
    for i in range(start, stop):
        tee.feed(b"line %04d\n" % i)
    return data


def _stderr_lines(capfd: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capfd.readouterr().err.splitlines() if line]


def test_deleted_file_is_recreated_and_lines_continue(tmp_path: Path, capfd) -> None:
    log = tmp_path / "logs" / "sglang.log"
    tee, sink = _tee(log)
    sent = _lines(tee, 0, 10)
    log.unlink()
    sent += _lines(tee, 10, 20)
    tee.close()
    assert sink.getvalue() == sent
    text = log.read_text()
    assert text.startswith(REOPEN_MARKER)  # the new file says why it starts mid-stream
    assert text.splitlines()[1:] == [f"line {i:04d}" for i in range(10, 20)]
    err = _stderr_lines(capfd)
    assert err == [f"specserve-launch: log file {log} was deleted or replaced; reopened it"]


def test_file_replaced_by_rename_is_reopened(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    tee, _ = _tee(log)
    _lines(tee, 0, 5)
    log.rename(tmp_path / "moved.log")  # an external rotation (logrotate without copytruncate)
    log.write_text("someone else's file\n")
    _lines(tee, 5, 10)
    tee.close()
    assert (tmp_path / "moved.log").read_text().splitlines() == [f"line {i:04d}" for i in range(5)]
    lines = log.read_text().splitlines()
    assert lines[0] == "someone else's file" and lines[1].startswith(REOPEN_MARKER)
    assert lines[2:] == [f"line {i:04d}" for i in range(5, 10)]


def test_removed_directory_that_cannot_be_recreated(tmp_path: Path, capfd) -> None:
    # Root ignores permission bits, so "cannot write here" is a regular file where the log
    # directory was: mkdir and open both fail (ENOTDIR/EEXIST) until it is gone.
    logs = tmp_path / "logs"
    log = logs / "sglang.log"
    tee, sink = _tee(log)
    sent = _lines(tee, 0, 5)
    log.unlink()
    logs.rmdir()
    logs.write_text("not a directory\n")
    sent += _lines(tee, 5, 25)
    assert sink.getvalue() == sent  # stdout never stopped
    err = _stderr_lines(capfd)
    assert len(err) == 1, err  # one line for the state change, not one per lost line
    assert err[0].startswith(f"specserve-launch: log file {log} unavailable (")
    assert "the server's output still goes to stdout, retrying the file" in err[0]
    logs.unlink()
    sent += _lines(tee, 25, 30)
    tee.close()
    assert sink.getvalue() == sent
    text = log.read_text()
    (gap,) = GAP.findall(text)
    assert int(gap[2]) == len(b"".join(b"line %04d\n" % i for i in range(5, 25)))
    assert gap[3] in ("ENOTDIR", "EEXIST")
    assert text.splitlines()[1:] == [f"line {i:04d}" for i in range(25, 30)]
    (back,) = _stderr_lines(capfd)
    assert back.startswith(f"specserve-launch: log file {log} writable again: {GAP_MARKER}")


def test_full_disk_keeps_stdout_and_counts_what_the_file_missed(tmp_path: Path, capfd) -> None:
    log = tmp_path / "sglang.log"
    os.symlink("/dev/full", log)  # every write: ENOSPC
    tee, sink = _tee(log, (KEY,))
    sent = _lines(tee, 0, 3)
    tee.feed(f"server_args={{'api_key': '{KEY}'}}\n".encode())
    sent += b"server_args={'api_key': '<redacted>'}\n"
    sent += _lines(tee, 3, 8)
    assert sink.getvalue() == sent
    (down,) = _stderr_lines(capfd)  # retries that fail again say nothing new
    assert "(ENOSPC: No space left on device)" in down
    log.unlink()  # space again: a real file this time
    sent += _lines(tee, 8, 10)
    tee.close()
    text = log.read_text()
    (gap,) = GAP.findall(text)
    assert gap[3] == "ENOSPC"
    assert int(gap[2]) == len(sent) - len(b"line 0008\nline 0009\n")
    assert gap[0] <= gap[1]
    assert text.splitlines()[1:] == ["line 0008", "line 0009"]
    assert KEY not in text and KEY not in capfd.readouterr().err


def test_unwritable_at_start_is_an_outage_not_a_crash(tmp_path: Path, capfd) -> None:
    (tmp_path / "logs").write_text("a file where the log directory should be\n")
    log = tmp_path / "logs" / "sglang.log"
    tee, sink = _tee(log)
    (down,) = _stderr_lines(capfd)  # said before the first line arrives
    assert f"log file {log} unavailable" in down
    sent = _lines(tee, 0, 50)
    tee.close()
    assert sink.getvalue() == sent


def test_messages_are_redacted(tmp_path: Path, capfd) -> None:
    # A path is no secret, but every byte the tee prints goes through the redactor.
    log = tmp_path / KEY / "sglang.log"
    (tmp_path / KEY).write_text("blocks the directory\n")
    tee, _ = _tee(log, (KEY,))
    _lines(tee, 0, 2)
    (tmp_path / KEY).unlink()
    _lines(tee, 2, 3)
    tee.close()
    err = capfd.readouterr().err
    assert "unavailable" in err and "writable again" in err
    assert KEY not in err and "<redacted>" in err


def test_backoff_grows_and_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(logtee, "RETRY_MIN_S", 0.5)
    (tmp_path / "logs").write_text("x\n")
    handler = logtee.LogFile(tmp_path / "logs" / "a.log", 0, 0, clock=lambda: now[0],
                             report=lambda _: None)  # fmt: skip
    handler.open_now()
    assert handler.outage is not None
    delays = []
    for _ in range(10):
        now[0] = handler.outage.retry_at
        handler.emit(logtee.logging.LogRecord("t", 20, "", 0, "line", None, None))
        delays.append(handler.outage.delay)
    assert delays[:3] == [1.0, 2.0, 4.0] and delays[-1] == logtee.RETRY_MAX_S


def test_a_quiet_server_gets_the_file_back_on_tick(tmp_path: Path) -> None:
    # The supervisor ticks the tee when no output arrives: the gap marker (what the exporter
    # counts) and a reopened file do not wait for the server's next line.
    (tmp_path / "logs").write_text("x\n")
    log = tmp_path / "logs" / "sglang.log"
    tee, _ = _tee(log)
    _lines(tee, 0, 2)
    (tmp_path / "logs").unlink()
    tee.tick()
    assert GAP.search(log.read_text()), log.read_text()
    log.unlink()
    tee.tick()
    assert log.read_text().startswith(REOPEN_MARKER)
    tee.close()
