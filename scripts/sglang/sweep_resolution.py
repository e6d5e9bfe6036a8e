"""Resolve many argvs with SGLang's real resolution, each in a fork of one warmed-up process.

Runs INSIDE an SGLang venv (tests/contract/resolution_sweep.py sends the argvs). What the
contract suite learns from it, per argv: whether SGLang's `prepare_server_args` +
`ServerArgs.resolve_once()` refuse it and with which words, and, when they do not, whether the
decode phase of the resolved `cuda_graph_config` is `disabled` (or the legacy
`disable_cuda_graph` ends up true), plus what resolution logged at WARNING and above.

Resolution writes process state (`envs.X.set(...)` puts SGLang variables into os.environ, a
hook may cache what it read), so one argv must not see another's. Two ways, per request:
- "isolate": "fork" (the default): the first argv is resolved in this process (it pays the lazy
  imports of model configs and hooks, ~5 s), then every argv runs in a fork of the process in
  that state, as the fork server does for whole requests; SGLang's code runs untouched.
- "isolate": "process": every argv in this process, os.environ put back after each, and the
  parser `prepare_server_args` builds made once: `ServerArgs.add_cli_args` evaluates the type
  annotations of every field (two thirds of an argv's 25-160 ms), so each new parser takes the
  first one's actions (argparse `parents=`, the same action objects). What SGLang does with the
  parsed arguments is unchanged. tests/contract/test_startup_refusals.py resolves the sweep's
  refusals and switch-offs again with "fork" and requires the same answers.

stdin: JSON {"argvs": [[...], ...], "isolate": "fork" | "process"}
stdout: JSON list, one result per argv, in order:
    {"ok": true, "decode_graph_off": bool, "decode_backend": "full", "warnings": [...],
     "fields": {...}}
    {"ok": false, "stage": "parse" | "resolve" | "check", "error": "AssertionError: <words>"}
`fields` are the resolved values of a few fields the checks model (`FIELDS`).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import sglang
from parse_argv import Collect, plain, prepare
from sglang.srt.arg_groups.overrides import resolution_result
from sglang.srt.server_args import ServerArgs

FIELDS = (
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "speculative_algorithm",
    "speculative_adaptive",
    "log_level",
    "decode_log_interval",
)


SGLANG_ROOT = Path(sglang.__file__).resolve().parent.parent


def raised_at(exc: BaseException) -> str:
    """`sglang/srt/...py:LINE function` of the innermost SGLang frame that raised `exc`."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if Path(f.filename).resolve().is_relative_to(SGLANG_ROOT / "sglang")
    ]
    if not frames:
        return ""
    frame = frames[-1]
    path = Path(frame.filename).resolve().relative_to(SGLANG_ROOT).as_posix()
    return f"{path}:{frame.lineno} {frame.name}"


def failed(stage: str, exc: BaseException) -> dict[str, Any]:
    message = " ".join(str(exc).split())
    return {
        "ok": False,
        "stage": stage,
        "error": f"{type(exc).__name__}: {message}",
        "raised_at": raised_at(exc),
    }


def resolve(argv: list[str]) -> dict[str, Any]:
    try:
        server_args, failure, _ = prepare(argv)
    except Exception as exc:  # a value SGLang's parser hands on and then cannot use
        return failed("parse", exc)
    if failure is not None:
        return {"ok": False, "stage": "parse", "error": failure["error"], "raised_at": ""}
    handler = Collect()
    logging.getLogger().addHandler(handler)
    try:
        stage = "resolve"
        with contextlib.redirect_stderr(io.StringIO()):
            server_args.resolve_once()
            resolved = {
                name: resolution_result(server_args, name)
                for name in (*FIELDS, "cuda_graph_config", "disable_cuda_graph")
            }
            # What the launcher runs next (entrypoints/engine.py, after resolve_once): the
            # assertions of arg_groups/validation_hook.py::check_server_args.
            stage = "check"
            server_args.check_server_args()
    except BaseException as exc:  # SGLang's validation raises ValueError, AssertionError...
        if isinstance(exc, KeyboardInterrupt):
            raise
        return failed(stage, exc)
    finally:
        logging.getLogger().removeHandler(handler)
    config = resolved["cuda_graph_config"]
    decode = getattr(config, "decode", None)
    backend = plain(getattr(decode, "backend", None))
    return {
        "ok": True,
        "decode_backend": backend,
        "decode_graph_off": backend == "disabled" or bool(resolved["disable_cuda_graph"]),
        "warnings": sorted(set(handler.messages)),
        "fields": {name: plain(resolved[name]) for name in FIELDS},
    }


def in_fork(argv: list[str]) -> dict[str, Any]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 0
        try:
            payload = json.dumps(resolve(argv)).encode()
        except BaseException as exc:  # reported to the parent, never raised past the fork
            payload = json.dumps(
                {"ok": False, "stage": "sweep", "error": f"{type(exc).__name__}: {exc}"}
            ).encode()
            code = 1
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    return result


def share_one_parser() -> None:
    """Make `ServerArgs.add_cli_args(parser)` hand every new parser the actions of one parser
    built by the real method ("isolate": "process")."""
    build = ServerArgs.add_cli_args
    template = argparse.ArgumentParser(prog="sglang serve", add_help=False)
    build(template)

    def add_cli_args(parser: argparse.ArgumentParser) -> None:
        parser._add_container_actions(template)
        parser._defaults.update(template._defaults)

    ServerArgs.add_cli_args = staticmethod(add_cli_args)


def main() -> int:
    request = json.load(sys.stdin)
    argvs: list[list[str]] = request["argvs"]
    fork = request.get("isolate", "fork") == "fork"
    results: list[dict[str, Any]] = []
    environ = dict(os.environ)
    if not fork:
        share_one_parser()
    with contextlib.redirect_stdout(sys.stderr):  # stdout is for the JSON answer alone
        for i, argv in enumerate(argvs):
            if fork and i > 0:
                results.append(in_fork(argv))
                continue
            # The first argv warms up in this process (the lazy imports every fork copies);
            # without forks each argv runs here, os.environ put back after it.
            results.append(resolve(argv))
            os.environ.clear()
            os.environ.update(environ)
    json.dump(results, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
