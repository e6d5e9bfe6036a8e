"""Profile -> the exact SGLang argv and environment; the one renderer every deployment path uses.

The API key never appears in a rendering: argv carries a placeholder, and `resolve_secret` reads
the file or variable only in the launcher, at exec time.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from specserve.profile.model import ApiKeySecret, Profile
from specserve.profile.nccl import preset_env
from specserve.secrets import MIN_LENGTH, secret_problem

API_KEY_FLAG = "--api-key"
API_KEY_PLACEHOLDER = "<from secret>"


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


def render_argv(profile: Profile) -> list[str]:
    t, p, s = profile.target, profile.parallelism, profile.server
    argv: list[str] = list(s.launch_command)
    _opt(argv, "--model-path", t.path)
    _switch(argv, "--trust-remote-code", t.trust_remote_code)
    _opt(argv, "--served-model-name", t.served_model_name)
    _opt(argv, "--tool-call-parser", t.tool_call_parser)
    _opt(argv, "--reasoning-parser", t.reasoning_parser)
    _opt(argv, "--context-length", t.context_length)
    _opt(argv, "--tp-size", p.tp)
    if p.dp != 1:
        _opt(argv, "--dp-size", p.dp)
    _switch(argv, "--enable-dp-attention", p.enable_dp_attention)
    if p.ep != 1:
        _opt(argv, "--ep-size", p.ep)
    _opt(argv, "--host", s.host)
    _opt(argv, "--port", s.port)
    _opt(argv, "--mem-fraction-static", s.mem_fraction_static)
    _opt(argv, "--cuda-graph-max-bs", s.cuda_graph_max_bs)
    _opt(argv, "--num-continuous-decode-steps", s.num_continuous_decode_steps)
    _switch(argv, "--disable-custom-all-reduce", s.disable_custom_all_reduce)
    _switch(argv, "--disable-cuda-graph", s.disable_cuda_graph and s.allow_disable_cuda_graph)
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


def render(profile: Profile) -> Rendered:
    return Rendered(
        argv=tuple(render_argv(profile)), env=render_env(profile), api_key=profile.server.api_key
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
