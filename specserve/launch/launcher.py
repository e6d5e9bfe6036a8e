"""`specserve-launch [PROFILE]`: the SGLang image's entrypoint.

Validates the profile, prints the rendered command (API key redacted), then runs the server as
its child and supervises it (supervise.py beside it): signals are forwarded to it, zombies
reaped, its exit status becomes the launcher's. It does not exec in place because SGLang ends by
SIGKILLing all its descendants, and the tee that copies its output must outlive that to record
SGLang's last traceback. With `logging.file` set, the launcher copies the output to stdout and a
size-rotated file; with a secret to inject (the API key), it copies even without a file, because
SGLang logs its arguments, key included, and the tee replaces every secret it knows by value
before anything is copied. The printed command shows no secret either: the API key as its source,
the other secrets extra_args carry (an admin key, the watermark keys) as the marker.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from specserve.launch.logtee import Tee
from specserve.launch.server_parser import known_commands, parse_only_argv, run_parser
from specserve.launch.supervise import run as supervise
from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.checks.secrets import GRPC_FIX, grpc_exposure
from specserve.profile.execlimits import oversizes, this_process
from specserve.profile.issues import errors
from specserve.profile.loader import ProfileError, load_profile
from specserve.profile.nodes import Placement, PlacementError, placement_options
from specserve.profile.render import (
    API_KEY_FLAG,
    Rendered,
    SecretError,
    argv_with_secret,
    format_shell,
    render,
)
from specserve.profile.report import format_text
from specserve.profile.sglang import VERSION_ENV, SglangVersionError, resolve_version
from specserve.secrets import (
    MIN_LENGTH,
    SECRET_FLAGS,
    WATERMARK_FLAG,
    Redactor,
    flag_values,
    is_inline_watermark_config,
    secret_problem,
    secrets_in_argv,
    watermark_keys,
)

DEFAULT_PROFILE = "/etc/specserve/profile.yaml"
PROFILE_ENV = "SPECSERVE_PROFILE"
EXIT_ERRORS, EXIT_USAGE = 1, 2
# Tokens the server's environment may carry (a Hugging Face token for gated downloads).
SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def injected_secrets(exec_argv: Sequence[str], environ: dict[str, str]) -> dict[str, str]:
    """Every secret handed to the server, by where it comes from: the values of SECRET_FLAGS
    in argv (the resolved server.api_key among them), the keys of --watermark-config (inline,
    or in the file it names, read as SGLang will read it) and SECRET_ENV variables.

    A new profile field carrying a secret renders into one of these flags or variables, or is
    added here; the tee redacts exactly this list. Raises SecretError for a secret the tee
    could not redact safely.
    """
    found: dict[str, str] = {}
    for i, arg in enumerate(exec_argv):
        flag, eq, inline = arg.partition("=")
        if flag not in SECRET_FLAGS:
            continue
        value = inline if eq else (exec_argv[i + 1] if i + 1 < len(exec_argv) else "")
        where = "server.api_key" if flag == API_KEY_FLAG else f"server.extra_args {flag}"
        found[where] = value
    for _, _, config in flag_values(exec_argv, (WATERMARK_FLAG,)):
        source = "" if is_inline_watermark_config(config) else f" (file {config})"
        for name, key in watermark_keys(config, read_file=True).items():
            found[f"server.extra_args {WATERMARK_FLAG}{source} {name}"] = key
    for name in SECRET_ENV:
        if environ.get(name):
            found[f"environment variable {name}"] = environ[name]
    for where, value in found.items():
        problem = secret_problem(value)
        if problem is not None:
            example = (
                "8 to 16 hex digits, e.g. `openssl rand -hex 8`, for a watermark key"
                if WATERMARK_FLAG in where
                else "e.g. `openssl rand -hex 32` for an API key"
            )
            raise SecretError(
                f"{where}: the secret {problem}. Fix: use one line of at least {MIN_LENGTH} "
                f"characters ({example})"
            )
    return found


def too_large_to_exec(
    argv: Sequence[str], env: dict[str, str], sources: Sequence[str], rendered: Rendered
) -> bool:
    """Whether exec would refuse `argv` and `env` (E2BIG) on this machine; each reason is
    written as one line naming the argument or variable and the limit."""
    found = oversizes(argv, env, this_process(), sources, rendered.env_sources)
    for problem in found:
        sys.stderr.write(f"specserve-launch: {problem.line()}; nothing was started\n")
    return bool(found)


def server_parse(rendered: Rendered, version: str) -> int:
    """The dry run's last step: the server's own parser judges the argv (the API key stays a
    placeholder; other secrets in it are redacted from what the parser says)."""
    command = parse_only_argv(rendered.argv)
    if command is None:
        sys.stderr.write(
            f"specserve-launch: no parse-only check for launch command {rendered.argv[0]!r} "
            f"(known: {known_commands()}); its own parser runs at start\n"
        )
        return 0
    # The parser's command is its interpreter and code, then the argv's flags.
    flags_at = len(rendered.argv) - (len(command) - 3)
    sources = ["(the parser's interpreter)"] * 3 + list(rendered.sources[flags_at:])
    if too_large_to_exec(command, {**os.environ, **rendered.env}, sources, rendered):
        return EXIT_ERRORS
    result = run_parser(command, rendered.env)
    if result.exit_code == 0:
        sys.stderr.write(f"specserve-launch: SGLang {version}'s own parser accepts the command\n")
        return 0
    secrets = secrets_in_argv(rendered.argv, read_files=True)
    redactor = Redactor([*secrets, *(os.environ.get(n) for n in SECRET_ENV)])
    sys.stderr.write(
        f"specserve-launch: SGLang {version}'s own parser refuses the command "
        f"(exit {result.exit_code}):\n{redactor.redact_text(result.message)}\n"
        "specserve-launch: Fix: correct the profile (server.extra_args or the field that sets "
        "the flag named above); nothing was started\n"
    )
    return EXIT_ERRORS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specserve-launch",
        description="Validate a deployment profile, print the command, and run SGLang.",
    )
    parser.add_argument(
        "profile",
        nargs="?",
        type=Path,
        default=None,
        help=f"profile YAML (default: ${PROFILE_ENV}, else {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="validate, print the command and run the server's own argument parser on it "
        "(SGLang's prepare_server_args); start nothing",
    )
    placement_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path = args.profile or Path(os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE)
    if not path.exists() and not path.is_symlink():
        sys.stderr.write(f"specserve-launch: profile {path} not found (set ${PROFILE_ENV})\n")
        return EXIT_USAGE
    try:
        profile = load_profile(path)
    except ProfileError as exc:
        if exc.usage:  # not a profile file at all (a directory, a FIFO, a symlink loop)
            issue = exc.issues[0]
            sys.stderr.write(f"specserve-launch: {issue.problem}. Fix: {issue.fix}\n")
            return EXIT_USAGE
        sys.stderr.write(format_text(path, exc.issues))
        return EXIT_ERRORS
    # The image says which SGLang it holds ($SPECSERVE_SGLANG_VERSION); flags follow it.
    try:
        version = resolve_version(None)
    except SglangVersionError as exc:
        sys.stderr.write(f"specserve-launch: {exc}\n")
        return EXIT_USAGE
    # Model dirs are checked when present (configs only: shards were verified at deploy time).
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    if errors(issues):
        sys.stderr.write(format_text(path, issues))
        return EXIT_ERRORS
    for issue in issues:
        sys.stderr.write(f"specserve-launch: {issue.render()}\n")
    try:
        rendered = render(profile, version, Placement(args.node_rank, args.rendezvous_host))
    except PlacementError as exc:
        sys.stderr.write(f"specserve-launch: {exc}; nothing was started\n")
        return EXIT_USAGE
    sys.stderr.write(f"specserve-launch: profile {profile.name}, running:\n")
    sys.stderr.write(f"specserve-launch: flags for SGLang {version} (${VERSION_ENV})\n")
    sys.stderr.write(format_shell(rendered))
    # The environment the launcher runs in can enable the gRPC server too (SGLANG_GRPC_PORT
    # from a container's env, which `check` never sees); the dry run judges it the same.
    exposed = grpc_exposure(
        rendered.argv, {**os.environ, **rendered.env}, rendered.api_key is not None
    )
    for problem in exposed:
        sys.stderr.write(f"specserve-launch: {problem}. Fix: {GRPC_FIX}; nothing was started\n")
    if exposed:
        return EXIT_ERRORS
    if args.dry_run:
        return server_parse(rendered, version)
    environ = dict(os.environ)
    try:
        exec_argv = argv_with_secret(rendered, environ)
    except SecretError as exc:
        sys.stderr.write(f"specserve-launch: {exc}\n")
        return EXIT_ERRORS
    environ.update(rendered.env)
    try:
        secrets = tuple(injected_secrets(exec_argv, environ).values())
    except SecretError as exc:
        sys.stderr.write(f"specserve-launch: {exc}\n")
        return EXIT_ERRORS
    if too_large_to_exec(exec_argv, environ, rendered.sources, rendered):
        return EXIT_ERRORS
    log = profile.logging
    sys.stderr.flush()
    sys.stdout.flush()
    tee = None
    if log.file or secrets:
        # Buffered: flush() retries a pipe write a signal cut short; unbuffered would drop it.
        sink = os.fdopen(os.dup(1), "wb")
        tee = Tee(sink, Path(log.file) if log.file else None, log.max_bytes, log.backup_count,
                  secrets)  # fmt: skip
    try:
        return supervise(exec_argv, environ, tee)
    except OSError as exc:
        sys.stderr.write(f"specserve-launch: cannot exec {exec_argv[0]}: {exc.strerror}\n")
        return EXIT_ERRORS


if __name__ == "__main__":
    sys.exit(main())
