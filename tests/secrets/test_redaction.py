"""specserve.secrets and the launcher's tee: every form of a secret, however the pipe splits it."""

from __future__ import annotations

import io
import json
import random
import shlex
from pathlib import Path

import pytest

from specserve.launch.logtee import copy_stream
from specserve.secrets import (
    MARKER,
    Redactor,
    secret_forms,
    secret_problem,
    secrets_in_server_info,
)

KEY = "sk-plant-7Qx9w2LmZ4"
# Quotes, a backslash and a non-ASCII letter: repr, JSON and shell spellings all differ.
AWKWARD = "sk-'q\"\\é-0123456789"


def _quoted(value: str) -> list[str]:
    """What a grep for a leaked secret looks for: the value and its quoted/escaped spellings."""
    return [value, repr(value), json.dumps(value), json.dumps(value, ensure_ascii=False),
            shlex.quote(value), f"'{value}'", f'"{value}"']  # fmt: skip


def _tee(data: bytes, secrets: tuple[str, ...], tmp: Path, pieces: list[int] | None = None,
         max_bytes: int = 10_000_000) -> tuple[bytes, str]:  # fmt: skip
    """Run the real tee over `data` delivered in reads of the given sizes."""

    class Pieces(io.RawIOBase):
        def __init__(self) -> None:
            self.at = 0
            self.sizes = list(pieces or [])

        def readable(self) -> bool:
            return True

        def read1(self, n: int = -1) -> bytes:
            size = self.sizes.pop(0) if self.sizes else n
            chunk = data[self.at : self.at + size]
            self.at += len(chunk)
            return chunk

    sink = io.BytesIO()
    log = tmp / "sglang.log"
    copy_stream(Pieces(), sink, log, max_bytes, 3, secrets)  # type: ignore[arg-type]
    files = sorted(tmp.glob("sglang.log*"), reverse=True)
    return sink.getvalue(), "".join(f.read_text(encoding="utf-8") for f in files)


@pytest.mark.parametrize("value", [KEY, AWKWARD])
def test_every_form_is_replaced(value: str) -> None:
    redactor = Redactor([value])
    for form in _quoted(value):
        out = redactor.redact_text(f"before {form} after")
        assert value not in out and MARKER in out, form
        for spelling in secret_forms(value):
            assert spelling not in out, (form, spelling)


def test_forms_cover_json_of_json_and_repr_in_json() -> None:
    forms = set(secret_forms(AWKWARD))
    assert json.dumps(json.dumps(AWKWARD))[3:-3] in forms
    assert json.dumps(repr(AWKWARD))[2:-2] in forms


def test_repeated_on_one_line_and_bytes_and_values() -> None:
    redactor = Redactor([KEY, "hf_token_value_123"])
    line = f"{KEY}{KEY} --api-key {KEY} HF={'hf_token_value_123'}"
    assert redactor.redact_text(line) == f"{MARKER}{MARKER} --api-key {MARKER} HF={MARKER}"
    assert redactor.redact_bytes(line.encode()) == redactor.redact_text(line).encode()
    doc = {"api_key": KEY, KEY: [f"x {KEY}", ("y", KEY)], "n": 3}
    assert redactor.redact_value(doc) == {
        "api_key": MARKER,
        MARKER: [f"x {MARKER}", ("y", MARKER)],
        "n": 3,
    }


def test_no_secrets_is_a_no_op() -> None:
    redactor = Redactor([None, ""])
    assert not redactor and redactor.redact_text("a b") == "a b"
    stream = redactor.stream()
    assert stream.feed(b"abc") == b"abc" and stream.close() == b""


@pytest.mark.parametrize("value", [KEY, AWKWARD])
def test_stream_split_at_every_point_equals_whole_redaction(value: str) -> None:
    redactor = Redactor([value, "second-secret-42"])
    payload = (
        f"server_args={{'api_key': {value!r}, 'x': 1}}\n"
        + json.dumps({"api_key": value, "launch_command": f"--api-key {value}"})
        + f"\n{value} {value}second-secret-42\npartial tail {value}"
    ).encode()
    expected = redactor.redact_bytes(payload)
    rng = random.Random(7)
    for trial in range(400):
        stream, out, at = redactor.stream(), b"", 0
        while at < len(payload):
            size = rng.randint(1, 24) if trial else 1  # trial 0: one byte per read
            out += stream.feed(payload[at : at + size])
            at += size
        out += stream.close()
        assert out == expected
        for form in redactor.byte_forms:
            assert form not in out


def test_a_complete_line_is_never_held_back() -> None:
    stream = Redactor([KEY]).stream()
    # The line ends: released at once even though it ends with the key's first characters.
    assert stream.feed(b"hello sk-pl\n") == b"hello sk-pl\n"
    # An unfinished line ending in a possible start of the key: only that start is held.
    assert stream.feed(b"next sk-pl") == b"next "
    assert stream.feed(b"ant-7Qx9w2LmZ4 done\n") == f"{MARKER} done\n".encode()
    # Text that cannot start the key is not held at all.
    assert stream.feed(b"progress 42%") == b"progress 42%"


def test_held_tail_at_end_of_stream_is_masked_when_long() -> None:
    stream = Redactor([KEY]).stream()
    assert stream.feed(b"crash sk-plant-7Q") == b"crash "
    assert stream.close() == MARKER.encode()
    stream = Redactor([KEY]).stream()
    assert stream.feed(b"x s") == b"x " and stream.close() == b"s"


def test_tee_redacts_stdout_and_every_rotated_generation(tmp_path: Path) -> None:
    lines = [f"[TP0] line {i:04d} server_args={{'api_key': {KEY!r}}} {KEY}\n" for i in range(300)]
    data = "".join(lines).encode()
    rng = random.Random(3)
    pieces = [rng.randint(1, 90) for _ in range(len(data))]
    out, files_text = _tee(data, (KEY,), tmp_path, pieces, max_bytes=4000)
    generations = sorted(tmp_path.glob("sglang.log.*"))
    assert len(generations) == 3  # rotated: sglang.log.1 .. .3 exist and were checked
    expected = data.replace(KEY.encode(), MARKER.encode())
    assert out == expected  # stdout copy: redacted, otherwise byte for byte
    for text in (out.decode(), files_text):
        assert text.count(MARKER) > 0
        for form in _quoted(KEY):
            assert form not in text
    assert files_text.endswith(expected.decode()[-len(files_text) :])


def test_tee_without_a_file_still_redacts_stdout() -> None:
    sink = io.BytesIO()
    copy_stream(io.BytesIO(f"k={KEY}\n".encode()), sink, None, 0, 0, (KEY,))
    assert sink.getvalue() == f"k={MARKER}\n".encode()


@pytest.mark.parametrize(
    ("value", "problem"),
    [("short", "is 5 characters long"), ("long-enough\nsecond", "line break"),
     ("cr-in-the-middle\r", "line break")],
)  # fmt: skip
def test_unredactable_secrets_are_named(value: str, problem: str) -> None:
    assert problem in (secret_problem(value) or "")
    assert secret_problem(KEY) is None


def test_secrets_found_in_server_info_by_field_and_in_launch_command() -> None:
    command = "--model-path /m --admin-api-key adm-12345678 --api-key=k-eq-123456"
    info = {"api_key": KEY, "admin_api_key": None, "bucket_time_to_first_token": [0.1],
            "launch_command": command}  # fmt: skip
    assert sorted(secrets_in_server_info(info)) == sorted([KEY, "adm-12345678", "k-eq-123456"])
    assert secrets_in_server_info({"launch_command": ["--api-key", MARKER]}) == []
