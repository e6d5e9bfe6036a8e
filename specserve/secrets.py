"""Redact known secret values (API key, tokens, passwords) by value, in every form they take.

Field-name redaction misses a secret that travels inside another value: SGLang logs its
resolved arguments as a dict repr (`server_args={... 'api_key': 'KEY' ...}`) and answers
`/server_info` with `launch_command`, the argv joined by spaces. So everything that copies
server output (the launcher's tee, bench, the Helm test) redacts the secret's *value*, in each
form a value takes when quoted or escaped: raw, Python repr, JSON (ASCII and UTF-8), JSON of
JSON (a log shipper's record of a JSON line), shell quoting.
"""

from __future__ import annotations

import ctypes
import json
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from typing import Any

MARKER = "<redacted>"
# SGLang flags whose value is a secret (sglang/srt/arg_groups/fields/serving.py, both verified
# versions), and the field names that hold them in /server_info and in the logged arguments.
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--ssl-keyfile-password")
SECRET_FIELD = re.compile(r"(^|_)(api_key|key|secret|password|token)$", re.IGNORECASE)
# SGLang 0.5.23's watermark settings: a JSON object inline, or the path of a file holding one
# (sglang/srt/sampling/watermarking/config.py load_watermark_config). Its `key` and `key_b` are
# secrets, the rest is not: SGLang itself redacts exactly these two wherever it prints the
# settings (watermarking/core.py redact_watermark_secrets, redact_watermark_command_line), and
# the fields that carry them in /server_info and the logged arguments.
WATERMARK_FLAG = "--watermark-config"
WATERMARK_KEYS = ("key", "key_b")
WATERMARK_FIELDS = ("watermark_key", "watermark_key_b")
WATERMARK_CONFIG_FIELD = "watermark_config"
# SGLang reads at most this much of a watermark config file (config.py _MAX_CONFIG_BYTES).
WATERMARK_FILE_BYTES = 4096
MIN_LENGTH = 8
# At end of stream a held-back tail that is this long a prefix of a secret is masked, not
# emitted: shorter prefixes are indistinguishable from ordinary text.
MIN_MASKED_PREFIX = 4


def _memmem() -> Callable[[bytes, bytes], bool]:
    """`needle in haystack` through the C library's memmem where it has one: 2-3x faster than
    bytes' own search on log text (the tee scans every byte of the server's output once per
    form); bytes' search elsewhere."""
    try:
        memmem = ctypes.CDLL(None).memmem
    except (OSError, AttributeError, TypeError):
        return bytes.__contains__
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)

    def contains(haystack: bytes, needle: bytes) -> bool:
        return memmem(haystack, len(haystack), needle, len(needle)) is not None

    return contains


_contains = _memmem()


def secret_problem(value: str) -> str | None:
    """Why `value` cannot be used as a secret, or None when it can.

    A secret shorter than MIN_LENGTH would be redacted out of ordinary text; a line break
    would split it across log lines, where no line-based reader could redact it.
    """
    if "\n" in value or "\r" in value:
        return "contains a line break"
    if len(value) < MIN_LENGTH:
        return (
            f"is {len(value)} characters long; a secret shorter than {MIN_LENGTH} cannot be "
            "redacted from logs without mangling ordinary text"
        )
    return None


def is_inline_watermark_config(value: str) -> bool:
    """SGLang's own rule: a value that starts with `{` (after blanks) is the JSON itself, any
    other value a file's path."""
    return value.lstrip().startswith("{")


def watermark_keys(config: str, read_file: bool = False) -> dict[str, str]:
    """The secrets (`key`, `key_b`, by name) a --watermark-config value carries: parsed from the
    inline JSON, or from the file it names when `read_file` (as SGLang reads it: the first
    WATERMARK_FILE_BYTES + 1 bytes). A value that does not parse carries none that can be named:
    SGLang refuses it at start ("failed to read watermark config JSON"), naming no key."""
    text = config
    if not is_inline_watermark_config(config):
        if not read_file:
            return {}
        try:
            with open(config, encoding="utf-8") as fh:
                text = fh.read(WATERMARK_FILE_BYTES + 1)
        except (OSError, UnicodeError):
            return {}
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    keys = {name: doc.get(name) for name in WATERMARK_KEYS}
    return {name: v for name, v in keys.items() if isinstance(v, str) and v and v != MARKER}


def flag_values(words: Sequence[str], flags: Iterable[str]) -> list[tuple[int, str, str]]:
    """(index of the value's word, flag, value) for each of `flags` in an argv, written
    `--flag value` or `--flag=value`."""
    wanted = set(flags)
    found = []
    for i, word in enumerate(words):
        flag, eq, inline = word.partition("=")
        if flag in wanted:
            if eq:
                found.append((i, flag, inline))
            elif i + 1 < len(words):
                found.append((i + 1, flag, words[i + 1]))
    return found


def secrets_in_argv(words: Iterable[str], read_files: bool = False) -> list[str]:
    """The values of SECRET_FLAGS in an argv (`--flag value` or `--flag=value`) and the keys of
    its --watermark-config (inline; also from the file it names when `read_files`)."""
    argv = list(words)
    found = []
    for _, flag, value in flag_values(argv, (*SECRET_FLAGS, WATERMARK_FLAG)):
        if flag == WATERMARK_FLAG:
            found += watermark_keys(value, read_files).values()
        elif value and value != MARKER:
            found.append(value)
    return found


def redact_argv(words: Sequence[str], keep: int | None = None) -> list[str]:
    """`words` as they may be shown: each SECRET_FLAGS value replaced by MARKER, and inside an
    inline --watermark-config each key's value (the rest of the settings stay readable, a file
    path is not a secret). The word at index `keep` is left as it is (the API key's
    placeholder, which the shell form prints as its source)."""
    shown = list(words)
    for at, flag, value in flag_values(shown, (*SECRET_FLAGS, WATERMARK_FLAG)):
        if at == keep:
            continue
        prefix = f"{flag}=" if shown[at].startswith(f"{flag}=") else ""
        if flag == WATERMARK_FLAG:
            keys = watermark_keys(value)
            # Every key, even one too short for the tee (refused before exec): here it is
            # replaced only inside this one word.
            shown[at] = prefix + Redactor(keys.values()).redact_text(value)
        elif value:
            shown[at] = prefix + MARKER
    return shown


def _watermark_in_launch_command(command: str) -> list[str]:
    """Keys of an inline --watermark-config in a launch command joined by spaces (SGLang's
    `" ".join(argv)`): the JSON holds spaces, so it is decoded from its `{`, not split."""
    found = []
    decoder = json.JSONDecoder()
    for match in re.finditer(re.escape(WATERMARK_FLAG) + r"[= ]\s*(?=\{)", command):
        try:
            doc, _ = decoder.raw_decode(command, match.end())
        except ValueError:
            continue
        if isinstance(doc, dict):
            found += watermark_keys(json.dumps(doc)).values()
    return found


def secrets_in_server_info(info: dict[str, Any]) -> list[str]:
    """Secret values a server-info document carries: fields named like a secret, the watermark
    keys (their fields and inside `watermark_config`), and the values of secret flags in
    `launch_command` (SGLang: the argv joined by spaces). SGLang 0.5.23 itself answers the
    watermark ones as MARKER; a server that does not is redacted all the same."""
    found = [
        v
        for k, v in info.items()
        if isinstance(k, str)
        and (SECRET_FIELD.search(k) or k in WATERMARK_FIELDS)
        and isinstance(v, str)
        and v
    ]
    config = info.get(WATERMARK_CONFIG_FIELD)
    if isinstance(config, str):
        found += watermark_keys(config).values()
    elif isinstance(config, dict):
        found += watermark_keys(json.dumps(config)).values()
    command = info.get("launch_command")
    if isinstance(command, str):
        found += secrets_in_argv(command.split())
        found += _watermark_in_launch_command(command)
    elif isinstance(command, list):
        found += secrets_in_argv(str(w) for w in command)
    return [v for v in found if v != MARKER]


def secret_forms(value: str) -> tuple[str, ...]:
    """Every spelling of `value` that an output may carry, longest first, without quotes.

    The quoted forms ('key', "key") contain these, so replacing these covers them.
    """
    as_json = json.dumps(value)[1:-1]
    as_repr = repr(value)[1:-1]
    forms = {
        value,
        as_repr,
        as_json,
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(as_json)[1:-1],
        json.dumps(as_repr)[1:-1],
        shlex.quote(value),
    }
    forms.discard("")
    return tuple(sorted(forms, key=lambda f: (-len(f), f)))


class Redactor:
    """Replaces every form of every known secret with MARKER, in text, bytes or JSON values."""

    def __init__(self, secrets: Iterable[str | None], marker: str = MARKER) -> None:
        values = sorted({s for s in secrets if s})
        self.marker = marker
        self.forms = tuple(
            sorted({f for v in values for f in secret_forms(v)}, key=lambda f: (-len(f), f))
        )
        self.byte_forms = tuple(f.encode("utf-8") for f in self.forms)
        # Alternatives longest first: the regex takes the first alternative that matches.
        self._text = re.compile("|".join(map(re.escape, self.forms))) if self.forms else None
        self._bytes = re.compile(b"|".join(map(re.escape, self.byte_forms))) if self.forms else None
        self.marker_bytes = marker.encode("utf-8")
        # A form with a line break (a Redactor built without secret_problem's check) may match
        # across lines: redact_bytes then substitutes over the whole input.
        self._multiline = any(b"\n" in f for f in self.byte_forms)
        self.longest = max((len(f) for f in self.byte_forms), default=0)

    def __bool__(self) -> bool:
        return bool(self.forms)

    def redact_text(self, text: str) -> str:
        if self._text is None or not any(f in text for f in self.forms):
            return text
        return self._text.sub(self.marker.replace("\\", "\\\\"), text)

    def redact_bytes(self, data: bytes) -> bytes:
        """`data` with every form replaced, as one regex substitution over it would, but the
        regex runs only over the lines that hold a form: the tee's reads are 64 KiB and more,
        and a regex scan of a whole read costs more than the copy itself (benchmarks/
        tee_redaction.py). No form holds a line break (secret_problem), so no match crosses
        a line and the lines are independent."""
        if self._bytes is None:
            return data
        if self._multiline:
            if not any(f in data for f in self.byte_forms):
                return data
            return self._bytes.sub(self._marker_sub, data)
        spans: dict[int, int] = {}
        for form in self.byte_forms:
            if not _contains(data, form):
                continue
            at = data.find(form)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at + len(form))
                end = len(data) if end < 0 else end
                spans[start] = end
                at = data.find(form, end)
        if not spans:
            return data
        out, last = [], 0
        for start in sorted(spans):
            end = spans[start]
            out += (data[last:start], self._bytes.sub(self._marker_sub, data[start:end]))
            last = end
        out.append(data[last:])
        return b"".join(out)

    def _marker_sub(self, _match: re.Match[bytes]) -> bytes:
        return self.marker_bytes

    def redact_value(self, obj: Any) -> Any:
        """A deep copy of a JSON-like value with every string (keys included) redacted."""
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, dict):
            return {self.redact_value(k): self.redact_value(v) for k, v in obj.items()}
        # Plain list/tuple, not type(obj): subclasses (Ansible's lazy containers) refuse
        # direct construction.
        if isinstance(obj, tuple):
            return tuple(self.redact_value(v) for v in obj)
        if isinstance(obj, list):
            return [self.redact_value(v) for v in obj]
        return obj

    def stream(self) -> StreamRedactor:
        return StreamRedactor(self)


class StreamRedactor:
    """Redacts a byte stream that arrives in arbitrary pieces (pipe reads).

    A secret may be split across two reads, so the end of a piece that could be the start of a
    secret is held back until the next piece decides. Only the unfinished last line can be
    held (secrets hold no line break), and only as many bytes as the longest form minus one:
    a complete line is never delayed.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = b""
        self._prefix = _prefix_pattern(redactor.byte_forms)

    def feed(self, data: bytes) -> bytes:
        """The part of everything fed so far that is safe and final; the rest stays held."""
        buffer = self._held + data if self._held else data
        if self._prefix is None:
            return buffer
        out = self._redactor.redact_bytes(buffer)
        start = max(len(out) - (self._redactor.longest - 1), out.rfind(b"\n") + 1, 0)
        match = self._prefix.search(out, start)
        if match is None:
            self._held = b""
            return out
        self._held = out[match.start() :]
        return out[: match.start()]

    def close(self) -> bytes:
        """End of stream: the held tail, masked when it is a long enough prefix of a secret."""
        held, self._held = self._held, b""
        if len(held) >= MIN_MASKED_PREFIX:
            return self._redactor.marker_bytes
        return held


def _prefix_pattern(forms: tuple[bytes, ...]) -> re.Pattern[bytes] | None:
    """Matches a non-empty proper prefix of any form that ends the subject.

    Built as nested optional groups (f0(?:f1(?:f2)?)?)\\Z so one search from the first position
    that might start a secret finds the longest such suffix (the leftmost match).
    """
    if not forms:
        return None
    alternatives = []
    for form in forms:
        pattern = b""
        for byte in reversed(form[1:-1] if len(form) > 1 else b""):
            pattern = b"(?:" + re.escape(bytes([byte])) + pattern + b")?"
        alternatives.append(re.escape(form[:1]) + pattern)
    return re.compile(b"(?:" + b"|".join(alternatives) + b")\\Z")
