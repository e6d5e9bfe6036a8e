"""promtool unit tests for every alert and recording rule, written as scenarios.

Test code, not shipped in the package nor committed as YAML: the `promtool_tests` fixture
(tests/monitoring/conftest.py) lays these scenarios out beside a copy of the committed rule file,
and tests/monitoring runs `promtool test rules` on them.

Each scenario is hand-written input (counters and gauges as the exporter would expose them) and
hand-computed expectations: which alert fires, when, with which labels and which rendered value.
promtool is the oracle; this module only lays the scenarios out as promtool's YAML, and renders
the expected annotations from the rule source so a wording change does not need two edits.
The `grafana-equivalence` file evaluates each Grafana-managed alert's own query and threshold
(recording rules inlined, no rule file loaded) on the same inputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specserve.monitoring.expansion import (
    AlertSettings,
    alert_annotations,
    alert_value_expr,
    compare_text,
    default_settings,
)
from specserve.monitoring.overrides import resolve_settings
from specserve.monitoring.prometheus import render_rules
from specserve.monitoring.rules import (
    ACCEPT_LENGTH_MEAN,
    ALERTS_BY_NAME,
    DECODE_LINE_RATE,
    DEFAULT_RUNBOOK_BASE_URL,
    RECORDING_WINDOW,
    REJECTED_RATIO,
    SPEEDUP_RATIO,
    THROUGHPUT_MEAN,
    Alert,
)

RULE_FILE = "../specserve-rules.yml"
JOB = "specserve-exporter"
NODE1 = "node1:9433"
NODE2 = "node2:9433"


def target(instance: str = NODE1, **extra: str) -> str:
    labels = {"job": JOB, "instance": instance, **extra}
    return ",".join(f'{key}="{value}"' for key, value in labels.items())


def ranked(instance: str = NODE1, dp: str = "0", **extra: str) -> str:
    return target(instance, dp=dp, tp="0", pp="0", **extra)


def counter(*segments: tuple[float, int], start: float = 0) -> str:
    """promtool values for a counter growing by `per_minute` for `minutes`, segment after segment.

    `a+bxn` expands to n+1 samples starting at a, so the first segment includes t=0 and each
    later one starts one step after the previous ended.
    """
    parts: list[str] = []
    value = start
    first = True
    for per_minute, minutes in segments:
        if first:
            parts.append(f"{_num(value)}+{_num(per_minute)}x{minutes}")
            value += per_minute * minutes
            first = False
        else:
            value += per_minute
            parts.append(f"{_num(value)}+{_num(per_minute)}x{minutes - 1}")
            value += per_minute * (minutes - 1)
    return " ".join(parts)


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


DECODING = counter((60, 60))
IDLE = "600x60"


@dataclass(frozen=True)
class Firing:
    """One expected firing alert: the series labels of the value query and $value as rendered."""

    labels: dict[str, str]
    value_text: str = ""


@dataclass(frozen=True)
class Check:
    alert: str
    at: str
    firing: tuple[Firing, ...] = ()


@dataclass(frozen=True)
class Case:
    name: str
    series: dict[str, str]
    checks: tuple[Check, ...]
    records: tuple[tuple[str, str, tuple[tuple[dict[str, str], float], ...]], ...] = field(
        default_factory=tuple
    )
    interval: str = "1m"


def _render_annotations(
    alert: Alert, firing: Firing, settings: AlertSettings | None = None
) -> dict[str, str]:
    settings = settings or default_settings(alert)
    rendered = alert_annotations(alert, settings.threshold_text, DEFAULT_RUNBOOK_BASE_URL)

    def fill(text: str) -> str:
        text = re.sub(
            r"\{\{ \$labels\.(\w+) \}\}", lambda m: firing.labels.get(m.group(1), ""), text
        )
        return re.sub(r"\{\{ \$value[^}]*\}\}", firing.value_text, text)

    return {key: fill(value) for key, value in rendered.items()}


def _alert_test(check: Check, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    alert = ALERTS_BY_NAME[check.alert]
    settings = resolve_settings(overrides or {})[alert.name]
    return {
        "eval_time": check.at,
        "alertname": check.alert,
        "exp_alerts": [
            {
                "exp_labels": {**firing.labels, **alert.labels},
                "exp_annotations": _render_annotations(alert, firing, settings),
            }
            for firing in check.firing
        ],
    }


def _labels_text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


def _record_test(name: str, at: str, samples: tuple[tuple[dict[str, str], float], ...]) -> dict:
    return {
        "expr": name,
        "eval_time": at,
        "exp_samples": [
            {"labels": name + _labels_text(labels), "value": value} for labels, value in samples
        ],
    }


def _group(case: Case, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {
        "name": case.name,
        "interval": case.interval,
        "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
    }
    if case.checks:
        group["alert_rule_test"] = [_alert_test(check, overrides) for check in case.checks]
    if case.records:
        group["promql_expr_test"] = [_record_test(*record) for record in case.records]
    return group


def _file(
    cases: list[Case],
    rule_files: list[str],
    overrides: Mapping[str, Any] | None = None,
    evaluation_interval: str = "1m",
) -> dict[str, Any]:
    return {
        "rule_files": rule_files,
        "evaluation_interval": evaluation_interval,
        "tests": [_group(case, overrides) for case in cases],
    }


def _at(family: str, window: str = RECORDING_WINDOW) -> str:
    return f"{family}{window}"


T1 = {"job": JOB, "instance": NODE1}
T2 = {"job": JOB, "instance": NODE2}
ACCEPT = "specserve_decode_accept_length"
TPUT = "specserve_decode_gen_throughput_tokens_per_second"
BASELINE = "specserve_baseline_gen_throughput_tokens_per_second"
PARSED = "specserve_log_lines_parsed_total"
REJECTED = "specserve_log_lines_rejected_total"


def _baselines(instance: str = NODE1) -> dict[str, str]:
    return {
        f"{BASELINE}{{{target(instance, concurrency=c)}}}": f"{v}x60"
        for c, v in (("1", 90), ("4", 140), ("8", 400))
    }


def _decoding(instance: str = NODE1, values: str = DECODING) -> dict[str, str]:
    return {f'{PARSED}{{{target(instance, kind="decode")}}}': values}


CASES: dict[str, list[Case]] = {
    "SpecDecodeDraftsRejected": [
        Case(
            "accept length 1.00 on two DP ranks fires once per server, then resolves",
            {
                f"{ACCEPT}_sum{{{ranked(dp='0')}}}": counter((60, 10), (150, 20)),
                f"{ACCEPT}_count{{{ranked(dp='0')}}}": counter((60, 30)),
                f"{ACCEPT}_sum{{{ranked(dp='1')}}}": counter((30, 10), (75, 20)),
                f"{ACCEPT}_count{{{ranked(dp='1')}}}": counter((30, 30)),
            },
            (
                Check("SpecDecodeDraftsRejected", "2m"),  # pending: true since 1m, for 2m
                Check("SpecDecodeDraftsRejected", "5m", (Firing(T1, "1.000"),)),
                Check("SpecDecodeDraftsRejected", "16m"),  # recovered to 2.5
            ),
        ),
        Case(
            # The default 2m window: all-1.00 lines fill it 2m after the switch at 20m, `for`
            # adds 2m, so it fires at 24m, or one evaluation later: promtool evaluates the
            # recording-rule group and the alert group in no fixed order. Checked at 25m; with a
            # 5m window the alert would only turn pending at 25m.
            "healthy 2.20 for 20m, then accept length 1.00: fires within window + for",
            {
                f"{ACCEPT}_sum{{{ranked()}}}": counter((132, 20), (60, 20)),
                f"{ACCEPT}_count{{{ranked()}}}": counter((60, 40)),
            },
            (
                Check("SpecDecodeDraftsRejected", "21m"),
                Check("SpecDecodeDraftsRejected", "25m", (Firing(T1, "1.000"),)),
            ),
        ),
        Case(
            "idle server: no decode lines, no alert",
            {
                f"{ACCEPT}_sum{{{ranked()}}}": "600x30",
                f"{ACCEPT}_count{{{ranked()}}}": "600x30",
            },
            (Check("SpecDecodeDraftsRejected", "10m"), Check("SpecDecodeDraftsRejected", "25m")),
        ),
        Case(
            "healthy EAGLE-3: accept length 2.20",
            {
                f"{ACCEPT}_sum{{{ranked()}}}": counter((132, 30)),
                f"{ACCEPT}_count{{{ranked()}}}": counter((60, 30)),
            },
            (Check("SpecDecodeDraftsRejected", "10m"), Check("SpecDecodeAcceptLengthLow", "25m")),
        ),
    ],
    "SpecDecodeAcceptLengthLow": [
        Case(
            "accept length 1.30 below the 1.5 floor fires after 15m, resolves at 2.50",
            {
                f"{ACCEPT}_sum{{{ranked()}}}": counter((78, 25), (150, 20)),
                f"{ACCEPT}_count{{{ranked()}}}": counter((60, 45)),
            },
            (
                Check("SpecDecodeAcceptLengthLow", "15m"),  # pending since 1m
                Check("SpecDecodeAcceptLengthLow", "20m", (Firing(T1, "1.300"),)),
                Check("SpecDecodeDraftsRejected", "20m"),  # 1.30 is not "rejected"
                Check("SpecDecodeAcceptLengthLow", "35m"),
            ),
        ),
        Case(
            "accept length 1.80 above the floor, and an idle server",
            {
                f"{ACCEPT}_sum{{{ranked()}}}": counter((108, 30)),
                f"{ACCEPT}_count{{{ranked()}}}": counter((60, 30)),
                f"{ACCEPT}_sum{{{ranked(NODE2)}}}": "600x30",
                f"{ACCEPT}_count{{{ranked(NODE2)}}}": "500x30",
            },
            (Check("SpecDecodeAcceptLengthLow", "25m"),),
        ),
        Case(
            "idle after low accept length: resolves once the window holds no decode line",
            {
                f"{ACCEPT}_sum{{{ranked()}}}": counter((78, 20), (0, 20)),
                f"{ACCEPT}_count{{{ranked()}}}": counter((60, 20), (0, 20)),
            },
            (
                Check("SpecDecodeAcceptLengthLow", "19m", (Firing(T1, "1.300"),)),
                Check("SpecDecodeAcceptLengthLow", "27m"),
            ),
        ),
    ],
    "SpecDecodeBelowBaseline": [
        Case(
            "80 tok/s at bucket 1 against a 90 tok/s baseline fires, recovers at 100 tok/s",
            {
                **_baselines(),
                f"{TPUT}_sum{{{ranked(concurrency='1')}}}": counter((80, 25), (100, 20)),
                f"{TPUT}_count{{{ranked(concurrency='1')}}}": counter((1, 45)),
            },
            (
                Check("SpecDecodeBelowBaseline", "15m"),
                Check(
                    "SpecDecodeBelowBaseline", "20m",
                    (Firing({**T1, "concurrency": "1"}, "88.89%"),),
                ),
                Check("SpecDecodeBelowBaseline", "35m"),
            ),
        ),
        Case(
            "different load: 150 tok/s at bucket 4 (baseline 140) and 50 tok/s at bucket 16 "
            "(no baseline) stay silent though both are below the bucket-8 baseline",
            {
                **_baselines(),
                f"{TPUT}_sum{{{ranked(concurrency='4')}}}": counter((150, 30)),
                f"{TPUT}_count{{{ranked(concurrency='4')}}}": counter((1, 30)),
                f"{TPUT}_sum{{{ranked(concurrency='16')}}}": counter((50, 30)),
                f"{TPUT}_count{{{ranked(concurrency='16')}}}": counter((1, 30)),
            },
            (Check("SpecDecodeBelowBaseline", "20m"), Check("SpecDecodeBelowBaseline", "30m")),
        ),
        Case(
            "DP attention: ranks' throughput is summed (2 x 220 > 400 silent, 2 x 150 < 400 fires)",
            {
                **_baselines(NODE1),
                **_baselines(NODE2),
                f"{TPUT}_sum{{{ranked(NODE1, '0', concurrency='8')}}}": counter((220, 30)),
                f"{TPUT}_count{{{ranked(NODE1, '0', concurrency='8')}}}": counter((1, 30)),
                f"{TPUT}_sum{{{ranked(NODE1, '1', concurrency='8')}}}": counter((220, 30)),
                f"{TPUT}_count{{{ranked(NODE1, '1', concurrency='8')}}}": counter((1, 30)),
                f"{TPUT}_sum{{{ranked(NODE2, '0', concurrency='8')}}}": counter((150, 30)),
                f"{TPUT}_count{{{ranked(NODE2, '0', concurrency='8')}}}": counter((1, 30)),
                f"{TPUT}_sum{{{ranked(NODE2, '1', concurrency='8')}}}": counter((150, 30)),
                f"{TPUT}_count{{{ranked(NODE2, '1', concurrency='8')}}}": counter((1, 30)),
            },
            (
                Check(
                    "SpecDecodeBelowBaseline", "20m",
                    (Firing({**T2, "concurrency": "8"}, "75%"),),
                ),
            ),
        ),
        Case(
            "idle: baselines present, no decode line",
            {
                **_baselines(),
                f"{TPUT}_sum{{{ranked(concurrency='1')}}}": "500x30",
                f"{TPUT}_count{{{ranked(concurrency='1')}}}": "10x30",
            },
            (Check("SpecDecodeBelowBaseline", "20m"),),
        ),
    ],
    "SpecDecodeGraphDisabled": [
        Case(
            "cuda graph False while decoding fires; True resolves",
            {
                **_decoding(),
                f'specserve_decode_graph_enabled{{{ranked(graph="cuda")}}}': "0x20 1x20",
            },
            (
                Check("SpecDecodeGraphDisabled", "5m"),
                Check("SpecDecodeGraphDisabled", "10m", (Firing(T1),)),
                Check("SpecDecodeGraphDisabled", "25m"),
            ),
        ),
        Case(
            "cuda graph True while decoding, and graph False on an idle server",
            {
                **_decoding(),
                **_decoding(NODE2, IDLE),
                f'specserve_decode_graph_enabled{{{ranked(graph="cuda")}}}': "1x30",
                f'specserve_decode_graph_enabled{{{ranked(NODE2, graph="cuda")}}}': "0x30",
            },
            (Check("SpecDecodeGraphDisabled", "15m"),),
        ),
        Case(
            "graph gauge stuck at 0 after decoding stops: resolves once idle",
            {
                **_decoding(values=counter((60, 10), (0, 30))),
                f'specserve_decode_graph_enabled{{{ranked(graph="cuda")}}}': "0x40",
            },
            (
                Check("SpecDecodeGraphDisabled", "10m", (Firing(T1),)),
                Check("SpecDecodeGraphDisabled", "16m"),
                Check("SpecDecodeGraphDisabled", "30m"),
            ),
        ),
    ],
    "SpecServeNoDecodeLines": [
        Case(
            "decode lines stop while SGLang reports running requests; resume resolves",
            {
                f"specserve_decode_last_line_timestamp_seconds{{{ranked()}}}": (
                    "0+60x5 300x9 900+60x15"
                ),
                'sglang:num_running_reqs{job="sglang",instance="node1:8000"}': "2x30",
            },
            (
                Check("SpecServeNoDecodeLines", "10m"),  # stale 300s > 180s since 9m: pending
                Check("SpecServeNoDecodeLines", "12m", (Firing(T1, "7m 0s"),)),
                Check("SpecServeNoDecodeLines", "16m"),
            ),
        ),
        Case(
            "load ended: SGLang's idle refresh reports 0 running; the log gauge still says 2",
            {
                f"specserve_decode_last_line_timestamp_seconds{{{ranked()}}}": "0+60x5 300x25",
                f"specserve_decode_running_requests{{{ranked()}}}": "2x30",
                'sglang:num_running_reqs{job="sglang",instance="node1:8000"}': "2x5 0x25",
            },
            (Check("SpecServeNoDecodeLines", "12m"), Check("SpecServeNoDecodeLines", "25m")),
        ),
    ],
    "SpecServeLogSourceDown": [
        Case(
            "log source unreadable for 10m fires, recovers",
            {
                'specserve_source_up{job="specserve-exporter",instance="node1:9433",'
                'source="/var/log/specserve/sglang/sglang.log"}': "1x2 0x10 1x10",
            },
            (
                Check("SpecServeLogSourceDown", "4m"),
                Check(
                    "SpecServeLogSourceDown", "6m",
                    (Firing({**T1, "source": "/var/log/specserve/sglang/sglang.log"}),),
                ),
                Check("SpecServeLogSourceDown", "15m"),
            ),
        ),
        Case(
            "readable source stays silent",
            {
                'specserve_source_up{job="specserve-exporter",instance="node1:9433",'
                'source="/var/log/specserve/sglang/sglang.log"}': "1x20",
            },
            (Check("SpecServeLogSourceDown", "15m"),),
        ),
    ],
    "SpecServeExporterDown": [
        Case(
            "exporter target down fires, back up resolves",
            {f"up{{{target()}}}": "1x2 0x15 1x10"},
            (
                Check("SpecServeExporterDown", "7m"),
                Check("SpecServeExporterDown", "10m", (Firing(T1),)),
                Check("SpecServeExporterDown", "20m"),
            ),
        ),
        Case(
            "no target of the job at all fires without target labels",
            {'up{job="prometheus",instance="localhost:9090"}': "1x20"},
            (Check("SpecServeExporterDown", "6m", (Firing({}),)),),
        ),
        Case(
            "exporter scraped: silent",
            {f"up{{{target()}}}": "1x20"},
            (Check("SpecServeExporterDown", "15m"),),
        ),
    ],
    "SpecServeLogLinesRejected": [
        Case(
            "a third of the stats lines rejected fires; rejections stop, it resolves",
            {
                **_decoding(),
                f'{REJECTED}{{{target(reason="unparsable_value")}}}': counter((30, 20), (0, 20)),
            },
            (
                Check("SpecServeLogLinesRejected", "10m"),
                Check("SpecServeLogLinesRejected", "12m", (Firing(T1, "33.33%"),)),
                Check("SpecServeLogLinesRejected", "27m"),
            ),
        ),
        Case(
            "new log format: every line rejected and no line ever parsed",
            {f'{REJECTED}{{{target(reason="unknown_format")}}}': counter((60, 20))},
            (Check("SpecServeLogLinesRejected", "12m", (Firing(T1, "100%"),)),),
        ),
        Case(
            "an occasional torn line (0.5%) and an idle server stay silent",
            {
                **_decoding(),
                f'{REJECTED}{{{target(reason="partial_line")}}}': counter((0.3, 30)),
                f'{PARSED}{{{target(NODE2, kind="decode")}}}': IDLE,
                f'{REJECTED}{{{target(NODE2, reason="partial_line")}}}': "5x60",
            },
            (Check("SpecServeLogLinesRejected", "25m"),),
        ),
    ],
    "SpecServeLogFileGap": [
        Case(
            "one gap marker read fires for the window, then resolves",
            {f"specserve_log_file_gaps_total{{{target()}}}": "0x5 1x30"},
            (
                Check("SpecServeLogFileGap", "5m"),
                Check("SpecServeLogFileGap", "8m", (Firing(T1, "1"),)),
                Check("SpecServeLogFileGap", "30m"),
            ),
        ),
        Case(
            "a file that never failed stays silent",
            {f"specserve_log_file_gaps_total{{{target()}}}": "0x30"},
            (Check("SpecServeLogFileGap", "20m"),),
        ),
    ],
    "SpecDecodeQueueBacklog": [
        Case(
            "20 queued while decoding fires, drains and resolves; 2 x 6 on DP ranks sums to 12",
            {
                **_decoding(),
                **_decoding(NODE2),
                f"specserve_decode_queued_requests{{{ranked()}}}": "20x20 0x20",
                f"specserve_decode_queued_requests{{{ranked(NODE2, '0')}}}": "6x40",
                f"specserve_decode_queued_requests{{{ranked(NODE2, '1')}}}": "6x40",
            },
            (
                Check("SpecDecodeQueueBacklog", "10m"),
                Check(
                    "SpecDecodeQueueBacklog", "12m", (Firing(T1, "20"), Firing(T2, "12"))
                ),
                Check("SpecDecodeQueueBacklog", "25m", (Firing(T2, "12"),)),
            ),
        ),
        Case(
            "queue gauge left at 20 by the last line before idle, and a short queue",
            {
                **_decoding(values=IDLE),
                **_decoding(NODE2),
                f"specserve_decode_queued_requests{{{ranked()}}}": "20x30",
                f"specserve_decode_queued_requests{{{ranked(NODE2)}}}": "5x30",
            },
            (Check("SpecDecodeQueueBacklog", "20m"),),
        ),
    ],
    "SpecDecodeKVCacheNearFull": [
        Case(
            "97% token usage on one DP rank while decoding fires; 50% resolves",
            {
                **_decoding(),
                f"specserve_decode_token_usage_ratio{{{ranked(dp='0')}}}": "0.97x20 0.5x20",
                f"specserve_decode_token_usage_ratio{{{ranked(dp='1')}}}": "0.40x40",
            },
            (
                Check("SpecDecodeKVCacheNearFull", "10m"),
                Check("SpecDecodeKVCacheNearFull", "12m", (Firing(T1, "97%"),)),
                Check("SpecDecodeKVCacheNearFull", "25m"),
            ),
        ),
        Case(
            "usage gauge left at 97% by the last line before idle",
            {
                **_decoding(values=IDLE),
                f"specserve_decode_token_usage_ratio{{{ranked()}}}": "0.97x30",
            },
            (Check("SpecDecodeKVCacheNearFull", "20m"),),
        ),
    ],
}

RECORDING_CASES: list[Case] = [
    Case(
        "window means weight every logged window; DP ranks' throughput is summed per bucket",
        {
            **_baselines(),
            **_decoding(),
            f"{ACCEPT}_sum{{{ranked(dp='0')}}}": counter((120, 20)),
            f"{ACCEPT}_count{{{ranked(dp='0')}}}": counter((60, 20)),
            f"{ACCEPT}_sum{{{ranked(dp='1')}}}": counter((180, 20)),
            f"{ACCEPT}_count{{{ranked(dp='1')}}}": counter((60, 20)),
            f"{TPUT}_sum{{{ranked(dp='0', concurrency='4')}}}": counter((200, 20)),
            f"{TPUT}_count{{{ranked(dp='0', concurrency='4')}}}": counter((2, 20)),
            f"{TPUT}_sum{{{ranked(dp='1', concurrency='4')}}}": counter((150, 20)),
            f"{TPUT}_count{{{ranked(dp='1', concurrency='4')}}}": counter((1, 20)),
            f"{TPUT}_sum{{{ranked(dp='0', concurrency='16')}}}": counter((300, 20)),
            f"{TPUT}_count{{{ranked(dp='0', concurrency='16')}}}": counter((1, 20)),
            f'{REJECTED}{{{target(reason="unparsable_value")}}}': counter((30, 20)),
            f'{PARSED}{{{target(kind="prefill")}}}': counter((30, 20)),
        },
        (),
        (
            (_at(ACCEPT_LENGTH_MEAN), "10m", ((T1, 2.5),)),
            (_at(ACCEPT_LENGTH_MEAN, "2m"), "10m", ((T1, 2.5),)),  # SpecDecodeDraftsRejected's
            (
                _at(THROUGHPUT_MEAN), "10m",
                (({**T1, "concurrency": "16"}, 300.0), ({**T1, "concurrency": "4"}, 250.0)),
            ),
            (_at(SPEEDUP_RATIO), "10m", (({**T1, "concurrency": "4"}, 250.0 / 140.0),)),
            (_at(DECODE_LINE_RATE), "10m", ((T1, 1.0),)),
            (_at(REJECTED_RATIO), "10m", ((T1, 0.25),)),
        ),
    ),
    Case(
        "idle: means and ratios are absent (not NaN), the decode line rate is 0",
        {
            **_baselines(),
            **_decoding(values=IDLE),
            f"{ACCEPT}_sum{{{ranked()}}}": "600x20",
            f"{ACCEPT}_count{{{ranked()}}}": "300x20",
            f"{TPUT}_sum{{{ranked(concurrency='1')}}}": "9000x20",
            f"{TPUT}_count{{{ranked(concurrency='1')}}}": "100x20",
            f'{REJECTED}{{{target(reason="unparsable_value")}}}': "3x20",
        },
        (),
        (
            (_at(ACCEPT_LENGTH_MEAN), "10m", ()),
            (_at(ACCEPT_LENGTH_MEAN, "2m"), "10m", ()),
            (_at(THROUGHPUT_MEAN), "10m", ()),
            (_at(SPEEDUP_RATIO), "10m", ()),
            (_at(DECODE_LINE_RATE), "10m", ((T1, 0.0),)),
            (_at(REJECTED_RATIO), "10m", ()),
        ),
    ),
]


def _grafana_equivalence_cases() -> list[Case]:
    """Each alert's first firing check, re-evaluated as Grafana evaluates it: query A with the
    recording rules inlined, compared with the threshold, no rule file loaded."""
    cases: list[Case] = []
    for name, alert_cases in CASES.items():
        alert = ALERTS_BY_NAME[name]
        settings = default_settings(alert)
        for case in alert_cases:
            firing = next((c for c in case.checks if c.alert == name and c.firing), None)
            if firing is None:
                continue
            value = alert_value_expr(alert, settings.threshold_text, inline=True)
            limit = compare_text(alert, settings.threshold_text)
            # `* 0 + 1`: the check is which series pass the threshold, not float-exact values.
            expr = f"((\n{value}\n) {alert.comparison} {limit}) * 0 + 1"
            cases.append(
                Case(
                    f"Grafana query for {name}: {case.name}",
                    case.series,
                    (),
                    ((expr, firing.at, tuple((f.labels, 1.0) for f in firing.firing)),),
                )
            )
            break
    return cases


def _expr_group(case: Case) -> dict[str, Any]:
    group = _group(Case(case.name, case.series, ()))
    group["promql_expr_test"] = [
        {
            "expr": expr,
            "eval_time": at,
            "exp_samples": [
                {"labels": _labels_text(labels), "value": value} for labels, value in samples
            ],
        }
        for expr, at, samples in case.records
    ]
    return group


# A rule file rendered with a window override, and promtool tests that only pass at that window.
WINDOW_OVERRIDE_DIR = "window-override"
WINDOW_OVERRIDES: dict[str, Any] = {"SpecDecodeDraftsRejected": {"window": "1m"}}
WINDOW_OVERRIDE_RULE_FILE = "specserve-rules.yml"

# 15 s samples: 2.20 for 10m, then 1.00. With the 1m window the mean is all-1.00 by 11m (10m45s
# on Prometheus 3's left-open ranges), so `for: 2m` fires by 13m15s; the default 2m window would
# still be pending then (condition true since 12m), and 12m30s is pending at either window.
WINDOW_OVERRIDE_CASES: list[Case] = [
    Case(
        "window 1m: the rule reads [1m], fires 1m + for after accept length drops to 1.00",
        {
            f"{ACCEPT}_sum{{{ranked()}}}": "0+33x40 1335+15x39",
            f"{ACCEPT}_count{{{ranked()}}}": "0+15x80",
        },
        (
            Check("SpecDecodeDraftsRejected", "12m30s"),
            Check("SpecDecodeDraftsRejected", "13m15s", (Firing(T1, "1.000"),)),
        ),
        (
            (_at(ACCEPT_LENGTH_MEAN, "1m"), "5m", ((T1, 2.2),)),
            (_at(ACCEPT_LENGTH_MEAN, "1m"), "12m", ((T1, 1.0),)),
        ),
        interval="15s",
    ),
]


def window_override_files() -> dict[str, dict[str, Any]]:
    """File name (under the promtool tests' window-override/) -> YAML document."""
    return {
        "overrides.yml": {"alerts": WINDOW_OVERRIDES},
        WINDOW_OVERRIDE_RULE_FILE: render_rules(WINDOW_OVERRIDES),
        "drafts-rejected-window-1m.yml": _file(
            WINDOW_OVERRIDE_CASES, [WINDOW_OVERRIDE_RULE_FILE], WINDOW_OVERRIDES, "15s"
        ),
    }


def promtool_test_files() -> dict[str, dict[str, Any]]:
    """File name (in the promtool tests' directory) -> promtool test document."""
    files: dict[str, dict[str, Any]] = {}
    for name, cases in CASES.items():
        files[f"{ALERTS_BY_NAME[name].runbook_slug}.yml"] = _file(cases, [RULE_FILE])
    files["recording-rules.yml"] = _file(RECORDING_CASES, [RULE_FILE])
    files["grafana-equivalence.yml"] = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [_expr_group(case) for case in _grafana_equivalence_cases()],
    }
    return files
