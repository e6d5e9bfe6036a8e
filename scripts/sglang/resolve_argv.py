"""Resolve argvs with SGLang's real `prepare_server_args` + `ServerArgs.resolve_once`, batched.

What SGLang's launcher does before it starts anything: parse, then run the resolution pipeline
(sglang/srt/arg_groups/pipeline.py: defaults per model and platform, then validation). Runs
INSIDE an SGLang venv; importing SGLang and its model configs costs ~5 s, so one process takes
a whole batch. stdin: JSON, either a list of argv lists or
    {"argvs": [[...], ...], "fields": ["max_running_requests", ...]}
    {"argvs": [[...], ...], "extra_fields": [...]}   (DEFAULT_FIELDS and these)
stdout: JSON list, one result per argv, in order:
    {"ok": true, "resolved": {...}, "decode_cuda_graph": {"backend": ..., "max_bs": ...},
     "warnings": [...]}
    {"ok": false, "stage": "parse", "exit_code": 2, "error": "sglang serve: error: ..."}
    {"ok": false, "stage": "resolve", "error": "ValueError: <SGLang's message>"}
`resolved` holds the requested fields of `ServerArgs.resolved_dict()` (a field this version lacks
reads {"missing": true}); `decode_cuda_graph` is the decode phase of the resolved
`cuda_graph_config` (backend "disabled" = decode runs eagerly). Only the requested fields leave
the process: resolved_dict() also holds the API key.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from typing import Any

from parse_argv import Collect, plain, prepare

DEFAULT_FIELDS = [
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "max_running_requests",
    "disable_cuda_graph",
    "disable_decode_cuda_graph",
    "num_continuous_decode_steps",
    "disable_overlap_schedule",
    "attention_backend",
    "tp_size",
    "dp_size",
    "ep_size",
    "device",
    "enable_metrics",
    "decode_log_interval",
]


def decode_graph(resolved: dict[str, Any]) -> dict[str, Any] | None:
    config = resolved.get("cuda_graph_config")
    decode = config.get("decode") if isinstance(config, dict) else None
    if not isinstance(decode, dict):
        return None
    return {"backend": plain(decode.get("backend")), "max_bs": plain(decode.get("max_bs"))}


def resolve_one(argv: list[str], fields: list[str]) -> dict[str, Any]:
    server_args, failure, warnings = prepare(argv)
    if failure is not None:
        return {**failure, "stage": "parse"}
    handler = Collect()
    logging.getLogger().addHandler(handler)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            server_args.resolve_once()
            resolved = server_args.resolved_dict()
    except BaseException as exc:  # SGLang's validation raises ValueError, AssertionError...
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = " ".join(str(exc).split())
        return {"ok": False, "stage": "resolve", "error": f"{type(exc).__name__}: {message}"}
    finally:
        logging.getLogger().removeHandler(handler)
    return {
        "ok": True,
        "resolved": {
            name: plain(resolved[name]) if name in resolved else {"missing": True}
            for name in fields
        },
        "decode_cuda_graph": decode_graph(resolved),
        "warnings": warnings + handler.messages,
    }


def main() -> int:
    request = json.load(sys.stdin)
    if isinstance(request, list):
        request = {"argvs": request}
    fields = request.get("fields") or [*DEFAULT_FIELDS, *request.get("extra_fields", [])]
    with contextlib.redirect_stdout(sys.stderr):  # stdout is for the JSON answer alone
        results = [resolve_one(argv, fields) for argv in request["argvs"]]
    json.dump(results, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
