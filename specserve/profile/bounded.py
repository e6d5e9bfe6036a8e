"""Bounded input: read a profile (or a model's JSON) with a size cap, and refuse YAML whose
structure would cost more than any real profile needs, before it is built into objects.

Why each limit exists (all measured on `specserve check` before this module):
- size: a profile is a page of YAML (the shipped ones are under 3 KiB); 1 MiB is generous and
  keeps parsing under a second. A FIFO, a directory or /dev/zero never reaches the parser.
- nodes after alias expansion: a 1.7 KiB "billion laughs" document in `name` took 69 s and
  10.7 GB; aliases are counted as the nodes they stand for, so it stops after 20,000.
- bytes after alias expansion: one 900 KB scalar aliased 1,000 times in `extra_args` is 1,001
  nodes, under the node limit, yet 900 MB of argv (`render` ran for minutes); aliases are
  counted as the text they stand for too, and the expanded document may hold no more scalar
  text than the file limit lets a document without aliases hold.
- depth: 100k nested brackets ended in RecursionError; no profile nests deeper than 5.
- items per list or mapping: 5M `extra_args` took 110 s and 3.6 GB; SGLang has about 400 flags.
Each refusal is an InputError naming the problem and the fix, in one line.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_PROFILE_BYTES = 1024 * 1024
MAX_NODES = 20_000
MAX_EXPANDED_BYTES = MAX_PROFILE_BYTES
MAX_DEPTH = 32
MAX_ITEMS = 1024
# config.json and model.safetensors.index.json: Kimi-K2.5's index is about 9 MB.
MAX_MODEL_JSON_BYTES = 64 * 1024 * 1024

# libyaml when PyYAML has it: the pure-Python parser needs 9 s for 1 MiB of YAML.
Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(Exception):
    """The input cannot be used. `usage` marks a wrong path (exit 2), not wrong content."""

    def __init__(self, problem: str, fix: str, *, usage: bool = False) -> None:
        super().__init__(f"{problem}. Fix: {fix}")
        self.problem, self.fix, self.usage = problem, fix, usage


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_capped(path: Path, limit: int, what: str = "the profile") -> bytes:
    """The bytes of regular file `path`, at most `limit` of them.

    Opened with O_NONBLOCK so a FIFO without a writer cannot hang us, and checked with fstat
    after the open (not stat before it) so the file judged is the file read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", f"give the path of {what}", usage=True) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(
                f"{path}: is a symlink loop (a link that leads back to itself)",
                f"point the link at {what} (ls -l {path} shows where it leads)",
                usage=True,
            ) from None
        if exc.errno == errno.EACCES:
            raise InputError(
                f"{path}: permission denied", f"make {what} readable by this user", usage=True
            ) from None
        raise InputError(
            f"{path}: cannot open: {exc.strerror}", "check the path", usage=True
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(
                f"{path}: is {_kind(st.st_mode)}, not a file",
                f"give the path of {what} file",
                usage=True,
            )
        if st.st_size > limit:
            raise InputError(
                f"{path}: is {st.st_size:,} bytes, over the {limit:,}-byte limit for {what}",
                f"give the right file; {what} is never that large (docs/reliability.md)",
            )
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # a file that grows while read (or lies about its size) is capped
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            except OSError as exc:
                raise InputError(f"{path}: read error: {exc.strerror}", "check the disk") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise InputError(
                f"{path}: holds over {limit:,} bytes, the limit for {what}",
                f"give the right file; {what} is never that large (docs/reliability.md)",
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_utf8(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(
            f"{path}: not valid UTF-8 at line {line}, column {column} "
            f"(byte 0x{data[exc.start]:02x})",
            "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        ) from None


@dataclass
class _Open:
    """A list or mapping being parsed."""

    where: str
    anchor: str | None
    mapping: bool
    size: int = 1  # nodes, aliases expanded, itself included
    text: int = 0  # bytes of scalar text, aliases expanded
    events: int = 0  # children seen (a mapping's keys and values both)
    key: str = field(default="")


def _label(parent: _Open | None) -> str:
    """Where the next child of `parent` sits, as a field path (server.extra_args[3])."""
    if parent is None:
        return "(profile)"
    if parent.mapping:
        inner = parent.key or "?"
        return inner if parent.where == "(profile)" else f"{parent.where}.{inner}"
    return f"{parent.where}[{parent.events}]"


def _text_bytes(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode("utf-8"))


@dataclass
class _Walk:
    """What the walk has counted, aliases expanded."""

    nodes: int = 0
    text: int = 0
    over_at: str | None = None  # where the text first passed MAX_EXPANDED_BYTES


def _too_much_text(walk: _Walk, *, finished: bool) -> InputError:
    size = f"{walk.text:,}" if finished else f"at least {walk.text:,}"
    return InputError(
        f"{walk.over_at}: the document expands to {size} bytes of text (aliases counted as "
        f"the text they stand for), over the {MAX_EXPANDED_BYTES:,}-byte limit",
        "write the value once instead of repeating it by alias; a profile holds settings, "
        "bulk content belongs in a file the server reads",
    )


def check_structure(text: str) -> None:
    """Walk the YAML's parse events (cheap, in libyaml) and stop at the first limit passed,
    before any node or object is built. Aliases count as the nodes and text they stand for.

    Past the text limit the walk goes on counting text only (events, no objects: linear in the
    file), so the refusal says how large the document really expands."""
    stack: list[_Open] = []
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, text bytes) it stands for
    walk = _Walk()
    try:
        for event in yaml.parse(text, Loader=Loader):
            if isinstance(event, yaml.CollectionEndEvent):
                done = stack.pop()
                if done.anchor is not None:
                    anchors[done.anchor] = (done.size, done.text)
                if stack:
                    stack[-1].size += done.size
                    stack[-1].text += done.text
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            parent = stack[-1] if stack else None
            where = _label(parent)
            if isinstance(event, yaml.AliasEvent):
                if any(o.anchor == event.anchor for o in stack):
                    raise InputError(
                        f"{where}: the alias *{event.anchor} refers to a node that contains it "
                        "(a recursive structure)",
                        "replace the alias with the value it should have",
                    )
                size, chars = anchors.get(event.anchor or "", (1, 0))
            elif isinstance(event, yaml.ScalarEvent):
                size, chars = 1, _text_bytes(event.value)
            else:
                size, chars = 1, 0
            walk.nodes += size
            walk.text += chars
            if walk.over_at is None and walk.text > MAX_EXPANDED_BYTES:
                walk.over_at = where
            if walk.over_at is None:
                _check_counts(walk, parent, where, event, len(stack))
            if parent is not None:
                parent.events += 1
                if parent.mapping and parent.events % 2 == 1:
                    value = getattr(event, "value", None)
                    parent.key = value[:60] if isinstance(value, str) else "?"
            if isinstance(event, yaml.CollectionStartEvent):
                mapping = isinstance(event, yaml.MappingStartEvent)
                stack.append(_Open(where, event.anchor, mapping))
            else:
                if event.anchor is not None and isinstance(event, yaml.ScalarEvent):
                    anchors[event.anchor] = (1, chars)
                if stack:
                    stack[-1].size += size
                    stack[-1].text += chars
    except yaml.YAMLError as exc:
        if walk.over_at is not None:
            raise _too_much_text(walk, finished=False) from None
        problem = _yaml_problem(exc)
        if "nesting depth" in problem:  # libyaml's own cap (1000) on flow collections
            raise InputError(problem, "flatten the structure (a profile nests 4 levels)") from None
        raise InputError(problem, "fix the YAML syntax") from None
    if walk.over_at is not None:
        raise _too_much_text(walk, finished=True)


def _check_counts(
    walk: _Walk, parent: _Open | None, where: str, event: yaml.NodeEvent, depth: int
) -> None:
    """The node, item and depth limits, checked as `event` (at `where`) arrives."""
    if walk.nodes > MAX_NODES:
        raise InputError(
            f"{where}: the document expands to over {MAX_NODES:,} values (aliases "
            "counted as what they stand for; a profile has a few hundred)",
            "remove the repeated aliases or the bulk data; a profile holds settings",
        )
    if parent is not None:
        events = parent.events + 1
        items = (events + 1) // 2 if parent.mapping else events
        if items > MAX_ITEMS:
            noun = "keys" if parent.mapping else "items"
            raise InputError(
                f"{parent.where}: has over {MAX_ITEMS:,} {noun}, the limit",
                "keep it to what SGLang needs (it has about 400 flags)",
            )
    if isinstance(event, yaml.CollectionStartEvent) and depth >= MAX_DEPTH:
        raise InputError(
            f"{where}: nested deeper than {MAX_DEPTH} levels (a profile has 4)",
            "flatten the structure; see docs/profile.md for the fields",
        )


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message in one line: the problem and where, without the quoted snippet."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    text = f"{context}, {problem}" if context else str(problem)
    return f"not valid YAML{where}: {' '.join(text.split())[:300]}"


def load_yaml(text: str) -> Any:
    """Parse YAML already checked by check_structure."""
    try:
        return yaml.load(text, Loader=Loader)  # a safe loader: CSafeLoader or SafeLoader
    except yaml.YAMLError as exc:
        raise InputError(_yaml_problem(exc), "fix the YAML syntax") from None
    except RecursionError:  # unreachable within MAX_DEPTH; kept so no input gives a traceback
        raise InputError("nested too deeply to parse", "flatten the structure") from None
