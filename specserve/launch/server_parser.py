"""The server's own argument parser, run on a rendered argv without starting anything.

`specserve-launch --dry-run` runs it inside the image, so the SGLang that will serve is the
judge of the command line before the running server is touched (Ansible runs the new image's
dry run in a throwaway container before it stops the old server: ansible/roles/server/tasks/
validate.yml). `specserve check` knows SGLang's option table; only the image's own parser knows
that `--chunked-prefill-size abc` is not an int, or which SGLang the image really holds.

The parse is the first thing the server does at start: SGLang's `sglang.launch_server` calls
`sglang.srt.server_args.prepare_server_args(sys.argv[1:])` (argparse, exit 2 with its usage
error; resolution, which needs an accelerator, comes after). The CPU stand-in has a function of
the same name and contract (specserve.standin.args, built from SGLang's option table), so the
stand-in and SGLang take this same path.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Launch command -> (interpreter, module whose prepare_server_args the server calls first).
# SGLang's interpreter is the image's python3 (specserve lives in its own venv there); the
# stand-in is installed with specserve, so it is this interpreter.
PARSERS: dict[tuple[str, ...], tuple[str, str]] = {
    ("python3", "-m", "sglang.launch_server"): ("python3", "sglang.srt.server_args"),
    ("specserve-standin",): (sys.executable, "specserve.standin.args"),
}
PARSE_ONLY = (
    "import sys; from {module} import prepare_server_args; prepare_server_args(sys.argv[1:])"
)
TIMEOUT_S = 300  # importing SGLang's server_args imports torch: seconds, not minutes
MAX_REPORTED_LINES = 20


@dataclass(frozen=True)
class ParseResult:
    exit_code: int
    message: str
    """What the parser said on failure: argparse's `prog: error: ...` line(s), else its tail."""


def parse_only_argv(argv: Sequence[str]) -> list[str] | None:
    """The command that runs the server's own parser on `argv`'s flags, or None when the
    launch command is not one we know the parser of."""
    for command, (interpreter, module) in PARSERS.items():
        if tuple(argv[: len(command)]) == command:
            return [interpreter, "-c", PARSE_ONLY.format(module=module), *argv[len(command) :]]
    return None


def known_commands() -> str:
    return ", ".join(" ".join(command) for command in PARSERS)


def _message(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    # argparse prints the whole usage (hundreds of SGLang options) before its one error line.
    errors = [line for line in lines if ": error: " in line]
    return "\n".join((errors or lines)[-MAX_REPORTED_LINES:])


def run_parser(command: Sequence[str], env: Mapping[str, str]) -> ParseResult:
    """Run `command` (from parse_only_argv) with `env` merged into this environment."""
    try:
        proc = subprocess.run(
            list(command), env={**os.environ, **env}, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        return ParseResult(127, f"{command[0]}: not found")
    except OSError as exc:  # E2BIG and the like: the launcher checks sizes first; no traceback
        return ParseResult(126, f"cannot run {command[0]}: {exc.strerror}")
    except subprocess.TimeoutExpired:
        return ParseResult(124, f"the parser did not answer in {TIMEOUT_S} s")
    if proc.returncode == 0:
        return ParseResult(0, "")
    return ParseResult(proc.returncode, _message(proc.stderr + proc.stdout))
