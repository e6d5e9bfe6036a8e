"""FileSource's reading itself, in-process: what reaches the sink, chunk by chunk.

The end-to-end file scenarios (rotation matrix, truncation, permissions) run the real exporter in
test_file_source.py; these pin down the read buffer's edges: lines across reads, a partial last
line left in the file, lines longer than the buffer.
"""

from __future__ import annotations

from pathlib import Path

from specserve_exporter.sources.file import READ_SIZE, FileSource


class Sink:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def __call__(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


def reader(path: Path) -> tuple[FileSource, Sink]:
    sink = Sink()
    return FileSource(path, sink, from_beginning=True), sink


def numbered_lines(total_bytes: int) -> bytes:
    lines, size, i = [], 0, 0
    while size < total_bytes:
        line = b"line %d %s\n" % (i, b"x" * (i % 97))
        lines.append(line)
        size += len(line)
        i += 1
    return b"".join(lines)


def test_lines_across_many_reads_arrive_whole_and_once(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    content = numbered_lines(3 * READ_SIZE + 12345)
    log.write_bytes(content)
    source, sink = reader(log)
    source.poll_once()
    assert sink.data == content
    assert len(sink.chunks) >= 4, "more than one read buffer's worth"
    assert all(chunk.endswith(b"\n") for chunk in sink.chunks)
    source.poll_once()
    assert sink.data == content, "a second poll reads nothing again"


def test_partial_last_line_is_left_until_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_bytes(b"one\ntwo\nthr")
    source, sink = reader(log)
    source.poll_once()
    source.poll_once()
    assert sink.data == b"one\ntwo\n"
    with log.open("ab") as f:
        f.write(b"ee\nfour\n")
    source.poll_once()
    assert sink.chunks == [b"one\ntwo\n", b"three\nfour\n"]


def test_partial_last_line_of_a_rotated_file_is_passed_on(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_bytes(b"one\ntw")
    source, sink = reader(log)
    source.poll_once()
    log.rename(tmp_path / "sglang.log.1")
    log.write_bytes(b"new\n")
    source.poll_once()  # notices the rotation: drains and ends the old file, opens the new one
    source.poll_once()
    assert sink.data == b"one\ntw\nnew\n"


def test_line_longer_than_the_read_buffer_arrives_whole(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    long_line = b"L" * (READ_SIZE + READ_SIZE // 2) + b"\n"
    log.write_bytes(b"before\n" + long_line + b"after\n")
    source, sink = reader(log)
    source.poll_once()
    assert sink.data.split(b"\n") == [b"before", long_line[:-1], b"after", b""]
