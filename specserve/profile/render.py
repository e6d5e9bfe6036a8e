"""Profile -> the exact SGLang argv and environment; the one renderer every deployment path uses.

The argv is the field table's (specserve/profile/fields.py) rows in order, each through the
emitter its `Emit` names.

The API key never appears in a rendering: argv carries a placeholder, and `resolve_secret` reads
the file or variable only in the launcher, at exec time. Secrets that extra_args carry (an admin
key, the watermark keys) are printed as the marker (`shown_argv`); only the launcher execs them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from specserve.profile.classlabel import ALLOWED_LABELS_FLAG, CLASS_LABEL_HEADER, HEADER_FLAG
from specserve.profile.fields import (
    ATTN_DP_FLAG,
    BY_PATH,
    DECODE_GRAPH_BACKEND_FLAG,
    FIELDS,
    PREFILL_GRAPH_BACKEND_FLAG,
    Emit,
    Field,
)
from specserve.profile.model import ApiKeySecret, Parallelism, Profile
from specserve.profile.nccl import preset_env
from specserve.profile.nodes import SINGLE, Placement, node_words
from specserve.profile.sglang import Contract, resolve_version, sglang_contract
from specserve.secrets import MIN_LENGTH, redact_argv, secret_problem

API_KEY_FLAG = BY_PATH["server.api_key"].flag
API_KEY_PLACEHOLDER = "<from secret>"


@dataclass(frozen=True)
class Rendered:
    argv: tuple[str, ...]
    env: dict[str, str]
    api_key: ApiKeySecret | None
    # The profile field of each argv word (server.extra_args[3], target.path) and of each
    # variable (env.NAME, nccl.overrides.NAME): refusals name where to fix a word.
    sources: tuple[str, ...] = ()
    env_sources: dict[str, str] = field(default_factory=dict)

    @property
    def api_key_index(self) -> int | None:
        """Position of the API key value in argv, when there is one."""
        if self.api_key is None:
            return None
        return self.argv.index(API_KEY_FLAG) + 1


class SecretError(Exception):
    """The API key secret named by the profile cannot be read."""


# One function per Emit (fields.py): (row, the field's value, profile, contract) -> argv words.
Emitter = Callable[[Field, Any, Profile, Contract], list[str]]


def _words(row: Field, value: tuple[str, ...], profile: Profile, contract: Contract) -> list[str]:
    return list(value)


def _value(row: Field, value: object, profile: Profile, contract: Contract) -> list[str]:
    return [] if value is None else [row.flag, str(value)]


def _switch(row: Field, value: bool, profile: Profile, contract: Contract) -> list[str]:
    return [row.flag] if value else []


def _unless_default(row: Field, value: object, profile: Profile, contract: Contract) -> list[str]:
    return [] if value == row.default else [row.flag, str(value)]


def _attn_dp(p: Parallelism, contract: Contract) -> bool:
    # 0.5.23 deprecates `--dp-size N --enable-dp-attention` for `--attn-dp-size N` (its
    # parallel_hook.handle_deprecated_dp_attention turns the old spelling into the new one).
    return p.enable_dp_attention and contract.option(ATTN_DP_FLAG) is not None


def _dp_size(row: Field, value: int, profile: Profile, contract: Contract) -> list[str]:
    if value == row.default or _attn_dp(profile.parallelism, contract):
        return []
    return [row.flag, str(value)]


def _dp_attention(row: Field, value: bool, profile: Profile, contract: Contract) -> list[str]:
    if _attn_dp(profile.parallelism, contract):
        return [ATTN_DP_FLAG, str(profile.parallelism.dp)]
    return _switch(row, value, profile, contract)


def _graphs_off(row: Field, value: bool, profile: Profile, contract: Contract) -> list[str]:
    if not (value and profile.server.allow_disable_cuda_graph):
        return []
    # `--disable-cuda-graph` is deprecated in 0.5.21 and 0.5.23 (a DeprecatedStoreTrueAction
    # that sets both phases' backend to disabled); its replacement says the same per phase.
    if contract.option(DECODE_GRAPH_BACKEND_FLAG) is not None:
        return [DECODE_GRAPH_BACKEND_FLAG, "disabled", PREFILL_GRAPH_BACKEND_FLAG, "disabled"]
    return [row.flag]


def _secret(row: Field, value: object, profile: Profile, contract: Contract) -> list[str]:
    return [] if value is None else [row.flag, API_KEY_PLACEHOLDER]


def _class_label(row: Field, value: str | None, profile: Profile, contract: Contract) -> list[str]:
    # The header is SGLang's default, written out so the bench and the stand-in name the header
    # SGLang reads whatever a later default becomes.
    if value is None:
        return []
    return [ALLOWED_LABELS_FLAG, value, HEADER_FLAG, CLASS_LABEL_HEADER]


def _nodes(
    row: Field, value: int, profile: Profile, contract: Contract, placement: Placement = SINGLE
) -> list[str]:
    # The one emitter that needs the deploy's rank: render_argv binds `placement` per call.
    return node_words(profile, placement)


EMITTERS: dict[Emit, Emitter] = {
    Emit.WORDS: _words,
    Emit.VALUE: _value,
    Emit.SWITCH: _switch,
    Emit.UNLESS_DEFAULT: _unless_default,
    Emit.DP_SIZE: _dp_size,
    Emit.DP_ATTENTION: _dp_attention,
    Emit.GRAPHS_OFF: _graphs_off,
    Emit.SECRET: _secret,
    Emit.NODES: _nodes,
    Emit.CLASS_LABEL: _class_label,
}


def _holder(profile: Profile, section: str) -> Any:
    """The object holding a section's values; None renders none of them."""
    if section == "drafter":  # the drafter's flags render only while speculation is on
        return profile.speculative
    return getattr(profile, section) if section else profile


def _rendered_rows(
    profile: Profile, sglang_version: str | None, placement: Placement
) -> list[tuple[Field, list[str]]]:
    """Every row of the field table that renders, in the table's order, with its words."""
    contract = sglang_contract(resolve_version(sglang_version))
    emitters = {**EMITTERS, Emit.NODES: partial(_nodes, placement=placement)}
    rows: list[tuple[Field, list[str]]] = []
    for row in FIELDS:
        holder = None if row.emit is None else _holder(profile, row.section)
        if row.emit is not None and holder is not None:
            value = (
                getattr(holder, row.name)
                if hasattr(holder, row.name)
                else profile.document_value(row.path)  # a row only render reads
            )
            rows.append((row, emitters[row.emit](row, value, profile, contract)))
    return rows


def _argv_and_sources(
    profile: Profile, sglang_version: str | None, placement: Placement
) -> tuple[list[str], list[str]]:
    argv: list[str] = []
    sources: list[str] = []
    for row, words in _rendered_rows(profile, sglang_version, placement):
        argv += words
        if row.emit is Emit.WORDS:  # a list written in the profile: name the item
            sources += [f"{row.path}[{i}]" for i in range(len(words))]
        else:
            sources += [row.path] * len(words)
    return argv, sources


def render_argv(
    profile: Profile, sglang_version: str | None = None, placement: Placement = SINGLE
) -> list[str]:
    """The argv for `sglang_version` (default: resolve_version(): env, else the pinned one) and
    the rank `placement` names (the deploy's; PlacementError when it does not fit): every row
    of the field table that renders, in the table's order."""
    return _argv_and_sources(profile, sglang_version, placement)[0]


def render_env(profile: Profile) -> dict[str, str]:
    env = preset_env(profile.nccl.preset)
    env.update(profile.nccl.overrides)
    env.update(profile.env)
    return dict(sorted(env.items()))


def env_sources(profile: Profile) -> dict[str, str]:
    """The profile field each variable of render_env comes from (the last one that sets it)."""
    preset = profile.nccl.preset
    sources = {name: f"nccl.preset({preset}).{name}" for name in preset_env(preset)}
    sources.update({name: f"nccl.overrides.{name}" for name in profile.nccl.overrides})
    sources.update({name: f"env.{name}" for name in profile.env})
    return sources


def render(
    profile: Profile, sglang_version: str | None = None, placement: Placement = SINGLE
) -> Rendered:
    argv, sources = _argv_and_sources(profile, sglang_version, placement)
    return Rendered(
        argv=tuple(argv),
        env=render_env(profile),
        api_key=profile.server.api_key,
        sources=tuple(sources),
        env_sources=env_sources(profile),
    )


def _shell_secret(secret: ApiKeySecret) -> str:
    # Expanded by the user's shell when pasted, so the key itself is never printed.
    if secret.env:
        return f'"${secret.env}"'
    return f'"$(cat {shlex.quote(secret.file or "")})"'


def shown_argv(rendered: Rendered) -> list[str]:
    """The argv as every format prints it: secrets that extra_args carry (an admin key, an SSL
    key password, the watermark keys) replaced by the marker, as the API key never appears."""
    return redact_argv(rendered.argv, keep=rendered.api_key_index)


def format_shell(rendered: Rendered) -> str:
    """`env K=V ... cmd --flag value ...`, one env var or flag per line, quoted with shlex."""
    lines = [f"{k}={shlex.quote(v)}" for k, v in rendered.env.items()]
    if lines:
        lines.insert(0, "env")
    secret_at = rendered.api_key_index
    words: list[str] = []
    for i, arg in enumerate(shown_argv(rendered)):
        if i == secret_at and rendered.api_key is not None:
            words.append(_shell_secret(rendered.api_key))
        else:
            words.append(shlex.quote(arg))
    # The launch command shares the first line; each flag starts a line and keeps its value.
    # Words are joined once per line: appending to the line's string copied it for every
    # value (quadratic; a flag with 1,000 long values took minutes).
    command: list[list[str]] = []
    for word, arg in zip(words, rendered.argv, strict=True):
        if arg.startswith("--") or not command:
            command.append([word])
        else:
            command[-1].append(word)
    return " \\\n  ".join(lines + [" ".join(line) for line in command]) + "\n"


def format_json(rendered: Rendered) -> str:
    secret = None
    if rendered.api_key is not None:
        secret = {"flag": API_KEY_FLAG, "file": rendered.api_key.file, "env": rendered.api_key.env}
    doc = {"argv": shown_argv(rendered), "env": rendered.env, "api_key_secret": secret}
    return json.dumps(doc, indent=2) + "\n"


def format_argv(rendered: Rendered) -> str:
    return "".join(arg + "\n" for arg in shown_argv(rendered))


FORMATS = {"shell": format_shell, "json": format_json, "argv": format_argv}


def resolve_secret(secret: ApiKeySecret, environ: dict[str, str]) -> str:
    """Read the API key from its file or variable; SecretError says which and why."""
    if secret.env:
        value = environ.get(secret.env, "")
        if not value:
            raise SecretError(
                f"server.api_key: environment variable {secret.env} is unset or "
                "empty; set it (e.g. from a Kubernetes Secret) before launch"
            )
        return _checked(value, f"environment variable {secret.env}")
    path = secret.file or ""
    try:
        with open(path, encoding="utf-8") as fh:
            value = fh.read().strip()
    except OSError as exc:
        raise SecretError(
            f"server.api_key: cannot read secret file {path}: {exc.strerror}; "
            "mount the secret there"
        ) from exc
    if not value:
        raise SecretError(f"server.api_key: secret file {path} is empty; put the key in it")
    return _checked(value, f"secret file {path}")


def _checked(value: str, source: str) -> str:
    """Refuse a key the log tee could not redact safely (specserve.secrets.secret_problem)."""
    problem = secret_problem(value)
    if problem is not None:
        raise SecretError(
            f"server.api_key: the key in {source} {problem}. Fix: use one line of at least "
            f"{MIN_LENGTH} characters, e.g. a random key from `openssl rand -hex 32`"
        )
    return value


def argv_with_secret(rendered: Rendered, environ: dict[str, str]) -> list[str]:
    argv = list(rendered.argv)
    at = rendered.api_key_index
    if at is not None and rendered.api_key is not None:
        argv[at] = resolve_secret(rendered.api_key, environ)
    return argv
