"""The tee works on whole reads, not lines (issue 25): what it writes is still exactly what the
per-line tee wrote (every form of every secret redacted however the reads split it, whole lines
in the file, invalid UTF-8 escaped, rotation between lines), in one write per read."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import pytest

from specserve import secrets
from specserve.launch import logtee
from specserve.launch.logtee import CHUNK, Tee, copy_stream
from specserve.secrets import MARKER, Redactor, secret_forms

KEY = "sk-chunk-0123456789abcdef"
# Quotes, a backslash and a non-ASCII letter: its repr, JSON and shell forms all differ.
AWKWARD = "pw-'q\"\\é-0123456789"
SECRETS = (KEY, AWKWARD)


def _random_log(rng: random.Random, lines: int) -> bytes:
    forms = [f.encode() for s in SECRETS for f in secret_forms(s)]
    out = []
    for i in range(lines):
        words = [b"[TP0] Decode batch, #running-req: %d" % i]
        for _ in range(rng.randint(0, 3)):
            words.append(rng.choice(forms) if rng.random() < 0.3 else b"x" * rng.randint(1, 40))
        if rng.random() < 0.05:
            words.append(b"\xff\xfe bad utf-8 \xc3")  # invalid, and a sequence cut short
        if rng.random() < 0.05:
            words.append("é ünïcode".encode())
        out.append(b" ".join(words) + b"\n")
    return b"".join(out)


class Reads(io.RawIOBase):
    """A pipe that returns reads of the given sizes."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.at, self.sizes = data, 0, sizes

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        size = self.sizes.pop(0) if self.sizes else n
        chunk = self.data[self.at : self.at + size]
        self.at += len(chunk)
        return chunk


def _generations(log: Path) -> list[Path]:
    found = sorted(log.parent.glob(log.name + ".*"), key=lambda p: -int(p.suffix[1:]))
    return [*found, log]


@pytest.mark.parametrize("seed", range(6))
def test_random_reads_give_what_one_whole_redaction_gives(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = _random_log(rng, 800)
    redactor = Redactor(SECRETS)
    # The reference: one regex substitution over the whole stream, then the file's escaping.
    expected = redactor._bytes.sub(lambda _: MARKER.encode(), data)  # type: ignore[union-attr]
    sizes = [rng.choice((1, 7, 100, 4096, CHUNK)) for _ in range(len(data))]
    sink, log = io.BytesIO(), tmp_path / "sglang.log"
    copy_stream(Reads(data, sizes), sink, log, 10_000, 100, SECRETS)  # type: ignore[arg-type]
    assert sink.getvalue() == expected
    files = _generations(log)
    assert len(files) > 5  # rotated many times
    text = b"".join(f.read_bytes() for f in files)
    assert text == expected.decode("utf-8", "backslashreplace").encode()
    assert b"\xff" in data and b"\\xff\\xfe bad utf-8 \\xc3" in text  # escaped as before
    for f in files:
        content = f.read_bytes()
        assert len(content) < 10_000 and content.endswith(b"\n")  # rotation between lines
    for form in redactor.byte_forms:
        assert form not in text and form not in sink.getvalue()


@pytest.mark.parametrize("libc", [True, False], ids=["memmem", "bytes-search"])
def test_redact_bytes_equals_the_whole_regex_on_random_text(
    libc: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not libc:  # a C library without memmem: bytes' own search
        monkeypatch.setattr(secrets, "_contains", bytes.__contains__)
    else:
        assert secrets._contains is not bytes.__contains__  # glibc has memmem: it is used
    redactor = Redactor([*SECRETS, "tok-ABCDEFGH", "tok-ABCDEFGHIJ"])  # one a prefix of another
    rng = random.Random(11)
    pieces = [*redactor.byte_forms, b"\n", b"tok-ABC", b"a", b"'", b"\\", b" "]
    for _ in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 60)))
        reference = redactor._bytes.sub(lambda _: MARKER.encode(), data)  # type: ignore[union-attr]
        assert redactor.redact_bytes(data) == reference, data


def test_a_key_split_across_two_full_reads(tmp_path: Path) -> None:
    line = f"server_args={{'api_key': {KEY!r}}}\n".encode()
    pad = b"p" * (CHUNK - line.index(KEY.encode()) - 5)  # the key starts 5 bytes before the end
    data = pad + line + b"after\n"
    sink, log = io.BytesIO(), tmp_path / "sglang.log"
    copy_stream(Reads(data, [CHUNK, CHUNK]), sink, log, 10_000_000, 2, (KEY,))
    expected = data.replace(KEY.encode(), MARKER.encode())
    assert sink.getvalue() == expected and log.read_bytes() == expected


def test_one_file_write_per_read_and_whole_lines_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "sglang.log"
    tee = Tee(io.BytesIO(), log, 10_000_000, 2, (KEY,))
    assert tee.file is not None
    writes: list[str] = []
    real_write, real_writev = os.write, os.writev

    def counting_write(fd: int, data: bytes) -> int:
        writes.append("write")
        return real_write(fd, data)

    def counting_writev(fd: int, buffers: list[memoryview]) -> int:
        writes.append("writev")
        return real_writev(fd, buffers)

    monkeypatch.setattr(logtee.os, "write", counting_write)
    monkeypatch.setattr(logtee.os, "writev", counting_writev)
    block = b"".join(b"[TP0] Decode batch, line %05d\n" % i for i in range(2000))
    tee.feed(block[:CHUNK] + b"half a li")
    assert len(writes) == 1, writes  # 2000 lines in one write, not 2000
    assert log.read_bytes() == block[:CHUNK]  # the unfinished line waits
    tee.feed(b"ne\n")
    tee.close()
    monkeypatch.undo()
    assert log.read_bytes() == block[:CHUNK] + b"half a line\n"


def test_an_unfinished_last_line_is_ended_at_close(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    sink = io.BytesIO()
    copy_stream(io.BytesIO(b"one\ntraceback without newline"), sink, log, 10_000_000, 2)
    assert sink.getvalue() == b"one\ntraceback without newline"
    assert log.read_bytes() == b"one\ntraceback without newline\n"


def test_a_line_longer_than_max_bytes_gets_a_file_of_its_own(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    long = b"L" * 3000 + b"\n"
    copy_stream(io.BytesIO(b"a\n" + long + b"b\n"), io.BytesIO(), log, 1024, 5)
    assert [f.read_bytes() for f in _generations(log)] == [b"a\n", long, b"b\n"]


def test_a_file_that_is_not_regular_is_never_rotated(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    os.symlink("/dev/null", log)  # as RotatingFileHandler: only regular files rotate
    copy_stream(io.BytesIO(b"x" * 100 + b"\n"), io.BytesIO(), log, 1024, 3)
    copy_stream(io.BytesIO(b"y\n" * 5000), io.BytesIO(), log, 1024, 3)
    assert log.is_symlink() and os.readlink(log) == "/dev/null"
    assert not list(tmp_path.glob("sglang.log.*"))


def test_the_file_size_is_read_from_the_file(tmp_path: Path) -> None:
    # Someone else appended to the file (or it was truncated by copytruncate): rotation
    # follows the file's real size, not a count of what the tee wrote.
    log = tmp_path / "sglang.log"
    tee = Tee(io.BytesIO(), log, 1000, 3)
    tee.feed(b"a" * 99 + b"\n")
    with log.open("ab") as other:
        other.write(b"o" * 850 + b"\n")
    tee.feed(b"b" * 99 + b"\n")  # 100 + 851 + 100 >= 1000: rotates first
    tee.close()
    assert log.read_bytes() == b"b" * 99 + b"\n"
    assert (tmp_path / "sglang.log.1").stat().st_size == 951


def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A write may take less than it was given (a signal, a filesystem near its limits).
    real_writev = os.writev

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        return real_writev(fd, [buffers[0][:5]])

    monkeypatch.setattr(logtee.os, "writev", short_writev)
    log = tmp_path / "sglang.log"
    tee = Tee(io.BytesIO(), log, 10_000_000, 2)
    tee.feed(b"first line\nsecond ")
    tee.feed(b"line\nthird line\n")
    tee.close()
    assert log.read_bytes() == b"first line\nsecond line\nthird line\n"
