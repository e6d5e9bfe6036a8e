"""Parse argvs with SGLang's real `prepare_server_args`, batched (importing SGLang costs ~1 s).

Runs INSIDE an SGLang venv. stdin: JSON, either a list of argv lists or
    {"argvs": [[...], ...], "fields": ["speculative_algorithm", ...], "resolve": false}
stdout: JSON list, one result per argv, in order:
    {"ok": true, "fields": {...}, "warnings": [...], "resolved": {...} | null,
     "resolve_error": null | "..."}
    {"ok": false, "exit_code": 2, "error": "sglang serve: error: ambiguous option: ..."}
    (an argv holding -h/--help gets {"ok": false, "exit_code": 0, "error": "...-h/--help..."}:
    nothing SGLang prints reaches stdout, which holds the JSON answer alone)
`fields` are read from the parsed (unresolved) ServerArgs; `resolve: true` also runs SGLang's
resolution (`ServerArgs.resolve_once`, what the launcher does before starting) and reports the
same fields resolved, or the exception it raised.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from typing import Any

DEFAULT_FIELDS = [
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "max_running_requests",
    "cuda_graph_max_bs_decode",
    "cuda_graph_max_bs_prefill",
    "cuda_graph_backend_decode",
    "cuda_graph_backend_prefill",
    "disable_cuda_graph",
    "disable_decode_cuda_graph",
    "num_continuous_decode_steps",
    "tp_size",
    "device",
    "enable_metrics",
]


def plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "value") and hasattr(value, "name"):
        return plain(value.value)
    return repr(value)


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().replace("\033[1;33m", "").replace("\033[0m", ""))


def read_fields(server_args: Any, fields: list[str], resolved: bool) -> dict[str, Any]:
    out = {}
    for name in fields:
        try:
            if resolved:
                from sglang.srt.arg_groups.resolution_hooks import resolution_result

                value = resolution_result(server_args, name)
            else:
                value = getattr(server_args, name)
        except Exception as exc:  # a field this version does not have
            out[name] = {"missing": type(exc).__name__}
            continue
        out[name] = plain(value)
    return out


HELP_FLAGS = ("-h", "--help")


def prepare(argv: list[str]) -> tuple[Any, dict[str, Any] | None, list[str]]:
    """(ServerArgs, None, warnings) or (None, failure, warnings) for SGLang's parse of argv."""
    from sglang.srt.server_args import prepare_server_args

    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    stderr = io.StringIO()
    # argparse prints --help (and SGLang may print other things) to stdout, which carries the
    # JSON answer of the whole batch: keep everything printed while parsing off it.
    stdout = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            server_args = prepare_server_args(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if code == 0 and any(token in HELP_FLAGS for token in argv):
            error = "the argv holds -h/--help: SGLang prints its usage and exits 0, never serving"
        else:
            # argparse prints the whole usage first; its last line is the message.
            lines = stderr.getvalue().strip().splitlines()
            error = lines[-1] if lines else f"exited {code}"
        return None, {"ok": False, "exit_code": code, "error": error}, handler.messages
    finally:
        # prepare_server_args calls logging.basicConfig(force=True), which drops our handler.
        logging.getLogger().removeHandler(handler)
        root.removeHandler(handler)
    return server_args, None, handler.messages


def parse_one(argv: list[str], fields: list[str], resolve: bool) -> dict[str, Any]:
    server_args, failure, warnings = prepare(argv)
    if failure is not None:
        return failure
    result: dict[str, Any] = {
        "ok": True,
        "fields": read_fields(server_args, fields, resolved=False),
        "warnings": warnings,
        "resolved": None,
        "resolve_error": None,
    }
    if resolve:
        handler = Collect()
        logging.getLogger().addHandler(handler)
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                server_args.resolve_once()
            result["resolved"] = read_fields(server_args, fields, resolved=True)
        except BaseException as exc:  # SGLang's validation raises ValueError, AssertionError...
            result["resolve_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            logging.getLogger().removeHandler(handler)
        result["resolve_warnings"] = handler.messages
    return result


def main() -> int:
    request = json.load(sys.stdin)
    if isinstance(request, list):
        request = {"argvs": request}
    fields = request.get("fields") or DEFAULT_FIELDS
    resolve = bool(request.get("resolve", False))
    with contextlib.redirect_stdout(sys.stderr):  # stdout is for the JSON answer alone
        results = [parse_one(argv, fields, resolve) for argv in request["argvs"]]
    json.dump(results, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
