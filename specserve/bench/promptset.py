"""Benchmark prompts: the shipped set (classes chat, code, math, long-context, multilingual) or a
user's JSONL file.

Each line is one JSON object: `{"prompt": "text"}` or `{"messages": [{"role", "content"}]}`,
with optional `"kind"` (default "custom") and `"id"` (default "<file>:<line>"). Kinds matter
because a drafter's accept length depends on content: code and math are more predictable than
open chat, so the set is kept per kind and requests interleave the kinds. A kind is the prompt's
class: `specserve bench` reports acceptance per class, so one class that accepts little (long
context, another language) does not vanish in the mean.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specserve.bench.settings import BUILTIN_PROMPTS

BUILTIN = BUILTIN_PROMPTS
DEFAULT_KIND = "custom"
_ROLES = ("system", "user", "assistant", "developer", "tool")


class PromptError(ValueError):
    """The prompt set cannot be used; the message names the file, line and fix."""


@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    messages: tuple[dict[str, str], ...]


def _messages(doc: dict[str, Any], where: str) -> tuple[dict[str, str], ...]:
    if "prompt" in doc and "messages" in doc:
        raise PromptError(f"{where}: give either 'prompt' or 'messages', not both")
    if "prompt" in doc:
        text = doc["prompt"]
        if not isinstance(text, str) or not text.strip():
            raise PromptError(f"{where}: 'prompt' must be a non-empty string")
        return ({"role": "user", "content": text},)
    raw = doc.get("messages")
    if not isinstance(raw, list) or not raw:
        raise PromptError(
            f'{where}: needs "prompt": "text" or "messages": [{{"role": "user", "content": ...}}]'
        )
    out: list[dict[str, str]] = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict):
            raise PromptError(f"{where}: messages[{i}] must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise PromptError(f"{where}: messages[{i}].role must be one of {', '.join(_ROLES)}")
        if not isinstance(content, str):
            raise PromptError(f"{where}: messages[{i}].content must be a string")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise PromptError(f"{where}: the last message must have role 'user' (the model answers it)")
    return tuple(out)


def parse_prompts(text: str, source: str) -> list[Prompt]:
    """Parse JSONL text; blank lines are skipped, anything else must be a prompt object."""
    prompts: list[Prompt] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise PromptError(
                f"{where}: not valid JSON ({exc}); one JSON object per line"
            ) from None
        if not isinstance(doc, dict):
            raise PromptError(f"{where}: each line must be a JSON object")
        kind = doc.get("kind", DEFAULT_KIND)
        if not isinstance(kind, str) or not kind.strip() or "," in kind:
            raise PromptError(f"{where}: 'kind' must be a non-empty string without commas")
        pid = doc.get("id", where)
        if not isinstance(pid, str | int) or isinstance(pid, bool):
            raise PromptError(f"{where}: 'id' must be a string or an integer")
        pid = str(pid)
        if pid in seen:
            raise PromptError(f"{where}: duplicate id {pid!r}; ids must be unique")
        seen.add(pid)
        prompts.append(Prompt(id=pid, kind=kind.strip(), messages=_messages(doc, where)))
    if not prompts:
        raise PromptError(f"{source}: no prompts found; write one JSON object per line")
    return prompts


def load_prompts(spec: str) -> tuple[list[Prompt], str]:
    """(prompts, description) for `builtin` or a JSONL path."""
    if spec == BUILTIN:
        path = resources.files("specserve.bench.prompts") / "builtin.jsonl"
        return parse_prompts(path.read_text(encoding="utf-8"), "builtin.jsonl"), BUILTIN
    file = Path(spec)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(
            f"--prompts {spec}: cannot read ({exc.strerror}); give a JSONL file or 'builtin'"
        ) from None
    except UnicodeDecodeError:
        raise PromptError(f"--prompts {spec}: not UTF-8 text") from None
    return parse_prompts(text, str(file)), str(file.resolve())


def select_kinds(prompts: list[Prompt], kinds: list[str] | None) -> list[Prompt]:
    """Keep `kinds` (all when None) and interleave them so every level sees each kind."""
    available = sorted({p.kind for p in prompts})
    wanted = kinds if kinds else available
    missing = [k for k in wanted if k not in available]
    if missing:
        raise PromptError(
            f"--kinds: no prompts of kind {', '.join(missing)}; "
            f"this prompt set has: {', '.join(available)}"
        )
    groups = [[p for p in prompts if p.kind == kind] for kind in wanted]
    mixed: list[Prompt] = []
    for i in range(max(len(g) for g in groups)):
        mixed.extend(g[i] for g in groups if i < len(g))
    return mixed
