"""`check` refuses the log levels that silence SGLang's batch lines, as SGLang's own logging
setup decides it, on every verified version.

In each venv: the Decode / Prefill batch lines are `logger.info(msg)` calls of the module
checks/logs.py names, whose logger is `logging.getLogger(__name__)`; then, per `--log-level`,
SGLang's `prepare_server_args` + `configure_logger(server_args, prefix=" TP0")` (what the
scheduler process runs, managers/scheduler.py) and whether that logger still writes INFO.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.checks.logs import REPORTER_LOGGER, silences_batch_lines
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract import resolution_sweep as rs
from tests.contract.sglang_venv import run_snippet
from tests.contract.test_resolved_argv import FIXTURES

LEVELS = ("debug", "info", "INFO", "warning", "warn", "error", "critical", "fatal", "notset")

SNIPPET = r"""
import ast, importlib.util, json, logging, sys
from sglang.srt.server_args import prepare_server_args
from sglang.srt.utils.common import configure_logger
req = json.load(sys.stdin)
spec = importlib.util.find_spec(req["module"])
tree = ast.parse(open(spec.origin, encoding="utf-8").read())
named = any(isinstance(n, ast.Assign) and ast.unparse(n) == "logger = logging.getLogger(__name__)"
            for n in tree.body)
infos = []
for fn in ast.walk(tree):
    if isinstance(fn, ast.FunctionDef) and fn.name in ("report_decode_stats",
                                                       "report_prefill_stats"):
        text = ast.unparse(fn)
        infos.append([fn.name, "logger.info(msg)" in text,
                      ("Decode batch" if "decode" in fn.name else "Prefill batch") in text])
writes = {}
for level in req["levels"]:
    args = prepare_server_args(["--model-path", req["model"], "--device", "cpu",
                                "--log-level", level, "--log-level-http", "critical"])
    configure_logger(args, prefix=" TP0")
    writes[level] = logging.getLogger(req["module"]).isEnabledFor(logging.INFO)
print(json.dumps({"named": named, "infos": sorted(infos), "writes": writes}))
"""


@cache
def upstream(version: str) -> dict[str, Any]:
    model = str(FIXTURES / "Llama-3.1-8B-Instruct")
    return run_snippet(
        version, SNIPPET, {"module": REPORTER_LOGGER, "levels": list(LEVELS), "model": model}
    )


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_batch_lines_are_info_lines_of_the_named_logger(version: str) -> None:
    got = upstream(version)
    assert got["named"], REPORTER_LOGGER
    assert got["infos"] == [
        ["report_decode_stats", True, True],
        ["report_prefill_stats", True, True],
    ]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_check_refuses_exactly_the_levels_that_silence_them(version: str) -> None:
    writes = upstream(version)["writes"]
    assert writes["info"] and not writes["warning"], writes  # the oracle tells them apart
    for level in LEVELS:
        assert silences_batch_lines(level) == (not writes[level]), level
        profile = rs.profile_with("kimi-eagle3", ("--log-level", level))
        issues = run_checks(profile, CheckOptions(sglang_version=version, configs_only=True))
        refused = [i for i in issues if i.severity == "error" and "silences" in i.problem]
        assert bool(refused) == (not writes[level]), (level, refused)
        if refused:
            assert refused[0].field == "server.extra_args[0]", refused
            assert f"--log-level {level}" in refused[0].problem, refused
