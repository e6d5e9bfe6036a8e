"""The Decode / Prefill batch lines the bundle reads stay on.

SGLang prints them with `logger.info(msg)` in
`sglang/srt/managers/scheduler_components/metrics_reporter.py` (`report_decode_stats`,
`report_prefill_stats`; 0.5.21 and 0.5.23), from the scheduler process, whose logging
`utils/common.py::configure_logger` sets up: `logging.basicConfig(level=--log-level)`, or, with
`SGLANG_LOGGING_CONFIG_PATH` set, `logging.config.dictConfig` of that file and nothing else.
At `--log-level warning` (or error, critical) no such line is written, and the exporter's
metrics, the verification gate and every accept-length alert see a server that never decodes.
`--log-level-http` sets uvicorn's access log only. tests/contract/test_log_level.py runs
SGLang's own configure_logger for each level and asks the reporter's logger.
"""

from __future__ import annotations

import logging

from specserve.profile.argview import profile_view
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract

REPORTER_LOGGER = "sglang.srt.managers.scheduler_components.metrics_reporter"
LOGGING_CONFIG_ENV = "SGLANG_LOGGING_CONFIG_PATH"
LINE_LEVEL = logging.INFO


def silences_batch_lines(level: str) -> bool:
    """Whether `--log-level level` drops SGLang's INFO batch lines (unknown levels: start-time
    refusals, checks/startup.py)."""
    number = logging.getLevelNamesMapping().get(level.upper())
    return number is not None and number > LINE_LEVEL


def check_logs(profile: Profile, contract: Contract) -> list[Issue]:
    issues: list[Issue] = []
    view = profile_view(profile, contract)
    level = view["log_level"] if view is not None else None
    if view is not None and isinstance(level, str) and silences_batch_lines(level):
        issues.append(
            error(
                view.where("log_level"),
                f"{view.words('log_level')} silences SGLang {contract.version}'s Decode batch and "
                "Prefill batch lines (logger.info in metrics_reporter.py): the exporter, the "
                "verification gate and the accept-length alerts would read no decode line",
                f"remove {view.flag('log_level')} from extra_args (SGLang's default is info), or "
                "use info / debug",
            )
        )
    if LOGGING_CONFIG_ENV in profile.env:
        issues.append(
            warning(
                f"env.{LOGGING_CONFIG_ENV}",
                f"SGLang {contract.version} then configures logging from that file alone "
                "(dictConfig, utils/common.py::configure_logger) and ignores --log-level; check "
                "does not read it",
                f"make sure the file keeps the logger {REPORTER_LOGGER} at INFO with a handler "
                "to stdout or stderr (the launcher's log), or remove it",
            )
        )
    return issues
