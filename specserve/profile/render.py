"""Profile -> the exact SGLang argv and environment; the one renderer every deployment path uses.

The API key never appears in a rendering: argv carries a placeholder, and `resolve_secret` reads
the file or variable only in the launcher, at exec time.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from specserve.profile.flags import DECODE_GRAPH_BACKEND_FLAG, PREFILL_GRAPH_BACKEND_FLAG
from specserve.profile.model import ApiKeySecret, Parallelism, Profile
from specserve.profile.nccl import preset_env
from specserve.profile.sglang import Contract, resolve_version, sglang_contract
from specserve.secrets import MIN_LENGTH, secret_problem

API_KEY_FLAG = "--api-key"
API_KEY_PLACEHOLDER = "<from secret>"
ATTN_DP_FLAG = "--attn-dp-size"


@dataclass(frozen=True)
class Rendered:
    argv: tuple[str, ...]
    env: dict[str, str]
    api_key: ApiKeySecret | None

    @property
    def api_key_index(self) -> int | None:
        """Position of the API key value in argv, when there is one."""
        if self.api_key is None:
            return None
        return self.argv.index(API_KEY_FLAG) + 1


class SecretError(Exception):
    """The API key secret named by the profile cannot be read."""


def _opt(argv: list[str], flag: str, value: object) -> None:
    if value is not None:
        argv += [flag, str(value)]


def _switch(argv: list[str], flag: str, on: bool) -> None:
    if on:
        argv.append(flag)


def _dp_attention(argv: list[str], p: Parallelism, contract: Contract) -> None:
    # 0.5.23 deprecates `--dp-size N --enable-dp-attention` for `--attn-dp-size N` (its
    # parallel_hook.handle_deprecated_dp_attention turns the old spelling into the new one).
    if p.enable_dp_attention and contract.option(ATTN_DP_FLAG) is not None:
        _opt(argv, ATTN_DP_FLAG, p.dp)
        return
    if p.dp != 1:
        _opt(argv, "--dp-size", p.dp)
    _switch(argv, "--enable-dp-attention", p.enable_dp_attention)


def _graphs_off(argv: list[str], contract: Contract) -> None:
    # `--disable-cuda-graph` is deprecated in 0.5.21 and 0.5.23 (a DeprecatedStoreTrueAction
    # that sets both phases' backend to disabled); its replacement says the same per phase.
    if contract.option(DECODE_GRAPH_BACKEND_FLAG) is not None:
        argv += [DECODE_GRAPH_BACKEND_FLAG, "disabled", PREFILL_GRAPH_BACKEND_FLAG, "disabled"]
    else:
        argv.append("--disable-cuda-graph")


def render_argv(profile: Profile, sglang_version: str | None = None) -> list[str]:
    """The argv for `sglang_version` (default: resolve_version(): env, else the pinned one)."""
    contract = sglang_contract(resolve_version(sglang_version))
    t, p, s = profile.target, profile.parallelism, profile.server
    argv: list[str] = list(s.launch_command)
    _opt(argv, "--model-path", t.path)
    _switch(argv, "--trust-remote-code", t.trust_remote_code)
    _opt(argv, "--served-model-name", t.served_model_name)
    _opt(argv, "--tool-call-parser", t.tool_call_parser)
    _opt(argv, "--reasoning-parser", t.reasoning_parser)
    _opt(argv, "--context-length", t.context_length)
    _opt(argv, "--tp-size", p.tp)
    _dp_attention(argv, p, contract)
    if p.ep != 1:
        _opt(argv, "--ep-size", p.ep)
    _opt(argv, "--host", s.host)
    _opt(argv, "--port", s.port)
    _opt(argv, "--mem-fraction-static", s.mem_fraction_static)
    _opt(argv, "--max-running-requests", s.max_running_requests)
    # `--cuda-graph-max-bs` is ambiguous in SGLang (-decode / -prefill); the field is decode's.
    _opt(argv, "--cuda-graph-max-bs-decode", s.cuda_graph_max_bs)
    _opt(argv, "--num-continuous-decode-steps", s.num_continuous_decode_steps)
    _switch(argv, "--disable-custom-all-reduce", s.disable_custom_all_reduce)
    if s.disable_cuda_graph and s.allow_disable_cuda_graph:
        _graphs_off(argv, contract)
    _switch(argv, "--enable-metrics", s.enable_metrics)
    _opt(argv, "--decode-log-interval", profile.logging.decode_log_interval)
    spec = profile.speculative
    if spec is not None:
        _opt(argv, "--speculative-algorithm", spec.algorithm)
        _opt(argv, "--speculative-draft-model-path", spec.path)
        _opt(argv, "--speculative-num-steps", spec.num_steps)
        _opt(argv, "--speculative-eagle-topk", spec.eagle_topk)
        _opt(argv, "--speculative-num-draft-tokens", spec.num_draft_tokens)
    if s.api_key is not None:
        argv += [API_KEY_FLAG, API_KEY_PLACEHOLDER]
    argv += s.extra_args
    return argv


def render_env(profile: Profile) -> dict[str, str]:
    env = preset_env(profile.nccl.preset)
    env.update(profile.nccl.overrides)
    env.update(profile.env)
    return dict(sorted(env.items()))


def render(profile: Profile, sglang_version: str | None = None) -> Rendered:
    return Rendered(
        argv=tuple(render_argv(profile, sglang_version)),
        env=render_env(profile),
        api_key=profile.server.api_key,
    )


def _shell_secret(secret: ApiKeySecret) -> str:
    # Expanded by the user's shell when pasted, so the key itself is never printed.
    if secret.env:
        return f'"${secret.env}"'
    return f'"$(cat {shlex.quote(secret.file or "")})"'


def format_shell(rendered: Rendered) -> str:
    """`env K=V ... cmd --flag value ...`, one env var or flag per line, quoted with shlex."""
    lines = [f"{k}={shlex.quote(v)}" for k, v in rendered.env.items()]
    if lines:
        lines.insert(0, "env")
    secret_at = rendered.api_key_index
    words: list[str] = []
    for i, arg in enumerate(rendered.argv):
        if i == secret_at and rendered.api_key is not None:
            words.append(_shell_secret(rendered.api_key))
        else:
            words.append(shlex.quote(arg))
    # The launch command shares the first line; each flag starts a line and keeps its value.
    command: list[str] = []
    for word, arg in zip(words, rendered.argv, strict=True):
        if arg.startswith("--") or not command:
            command.append(word)
        else:
            command[-1] += " " + word
    return " \\\n  ".join(lines + command) + "\n"


def format_json(rendered: Rendered) -> str:
    secret = None
    if rendered.api_key is not None:
        secret = {"flag": API_KEY_FLAG, "file": rendered.api_key.file, "env": rendered.api_key.env}
    doc = {"argv": list(rendered.argv), "env": rendered.env, "api_key_secret": secret}
    return json.dumps(doc, indent=2) + "\n"


def format_argv(rendered: Rendered) -> str:
    return "".join(arg + "\n" for arg in rendered.argv)


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
