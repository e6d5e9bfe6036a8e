"""Secrets a profile would hand to someone who must not have them, before anything starts.

SGLang's native gRPC server (`--grpc-port`, or `SGLANG_GRPC_PORT` in the environment; not the
legacy `--smg-grpc-mode` / `--grpc-mode`) listens on `--host` without authentication and answers
GetServerInfo with the resolved arguments and `launch_command`, redacting only the watermark keys
(0.5.21 and 0.5.23: entrypoints/grpc_bridge.py on the node that serves HTTP; 0.5.23 also on every
other node, utils/common.py start_follower_grpc_server). So:
- with an API key, SGLang itself refuses the launch (arg_groups/serving_hook.py, both versions,
  on every node): `check` refuses it first, in SGLang's words, instead of a server that dies at
  start (on a follower, after the leader is up);
- with `--ssl-keyfile-password`, SGLang starts and serves the password to whoever reaches the
  port: refused. Binding that port to loopback is not an option SGLang has (it is `--host`'s, the
  HTTP server's too), nor is redacting more than the watermark keys.
The watermark keys of `--watermark-config` are secrets like the API key: one the launcher could
not redact from logs (shorter than 8 characters) is refused, and keys written inline in the
profile are a warning (the profile file, the chart's ConfigMap and Ansible's copy hold them in
clear; a file mounted as a secret does not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract
from specserve.secrets import (
    MIN_LENGTH,
    WATERMARK_FLAG,
    flag_values,
    is_inline_watermark_config,
    secret_problem,
    watermark_keys,
)

GRPC_PORT_FLAG = "--grpc-port"
GRPC_PORT_ENV = "SGLANG_GRPC_PORT"
LEGACY_GRPC_FLAGS = ("--smg-grpc-mode", "--grpc-mode")
API_KEY_FLAGS = ("--api-key", "--admin-api-key")
SSL_PASSWORD_FLAG = "--ssl-keyfile-password"
# SGLang's own refusal, verbatim (tests/secrets/test_grpc_secrets.py holds every verified
# version to it).
SGLANG_GRPC_KEY_REFUSAL = (
    "--grpc-port is incompatible with --api-key/--admin-api-key: the native gRPC listener "
    "bypasses HTTP auth middleware"
)
GRPC_FIX = (
    f"remove {GRPC_PORT_FLAG} from server.extra_args and {GRPC_PORT_ENV} from the environment "
    "(SGLang's native gRPC server has no authentication of its own)"
)


def native_grpc(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """How the native gRPC server gets its port (`--grpc-port N` / `SGLANG_GRPC_PORT=N`), or None
    when it does not start: no port, or the legacy SMG mode, which takes precedence."""
    if any(word.split("=", 1)[0] in LEGACY_GRPC_FLAGS for word in argv):
        return None
    ports = flag_values(argv, (GRPC_PORT_FLAG,))
    if ports:
        return f"{GRPC_PORT_FLAG} {ports[-1][2]}"
    if env.get(GRPC_PORT_ENV, "").strip():
        return f"{GRPC_PORT_ENV}={env[GRPC_PORT_ENV].strip()}"
    return None


def grpc_exposure(argv: Sequence[str], env: Mapping[str, str], api_key: bool) -> list[str]:
    """Why this argv and environment must not start (one sentence each), or nothing. `api_key`:
    whether the server gets an API key from a profile field (argv may hold its placeholder)."""
    grpc = native_grpc(argv, env)
    if grpc is None:
        return []
    problems = []
    keys = api_key or bool(flag_values(argv, API_KEY_FLAGS))
    if keys:
        problems.append(
            f"{grpc} with an API key: SGLang refuses it at start, on every node: "
            f'"{SGLANG_GRPC_KEY_REFUSAL}" (its GetServerInfo answers api_key, admin_api_key '
            "and a launch_command holding --api-key, without authentication)"
        )
    if flag_values(argv, (SSL_PASSWORD_FLAG,)):
        problems.append(
            f"{grpc} with {SSL_PASSWORD_FLAG}: SGLang's native gRPC server answers GetServerInfo "
            "without authentication (on every node from 0.5.23) with the resolved arguments and "
            "launch_command, the SSL key password in clear; it redacts only the watermark keys "
            "and listens on --host, the HTTP server's address"
        )
    return problems


def _grpc_field(profile: Profile) -> str:
    for i, word in enumerate(profile.server.extra_args):
        if word.split("=", 1)[0] == GRPC_PORT_FLAG:
            return f"server.extra_args[{i}]"
    return f"env.{GRPC_PORT_ENV}"


def _grpc_issues(profile: Profile, contract: Contract) -> list[Issue]:
    problems = grpc_exposure(
        profile.server.extra_args, profile.env, profile.server.api_key is not None
    )
    return [
        error(_grpc_field(profile), f"SGLang {contract.version}: {problem}", GRPC_FIX)
        for problem in problems
    ]


def _watermark_issues(profile: Profile) -> list[Issue]:
    issues: list[Issue] = []
    args = profile.server.extra_args
    for at, _, value in flag_values(args, (WATERMARK_FLAG,)):
        where = f"server.extra_args[{at}]"
        if not is_inline_watermark_config(value):
            continue  # a file on the node: the launcher reads it and judges its keys
        keys = watermark_keys(value)
        for name, key in keys.items():
            problem = secret_problem(key)
            if problem is not None:
                issues.append(
                    error(
                        where,
                        f"{WATERMARK_FLAG} {name}: the secret {problem}",
                        f"use a key of at least {MIN_LENGTH} characters: 8 to 16 hex digits "
                        "(e.g. `openssl rand -hex 8`)",
                    )
                )
        if keys:
            issues.append(
                warning(
                    where,
                    f"{WATERMARK_FLAG} holds its {' and '.join(keys)} inline: the profile file, "
                    "the chart's ConfigMap and the copy Ansible writes keep them in clear "
                    "(specserve's own output shows them as <redacted>)",
                    f"put the settings in a JSON file mounted as a secret and pass its path: "
                    f"{WATERMARK_FLAG} /run/secrets/watermark.json",
                )
            )
    return issues


def check_secrets(profile: Profile, contract: Contract) -> list[Issue]:
    return _grpc_issues(profile, contract) + _watermark_issues(profile)
