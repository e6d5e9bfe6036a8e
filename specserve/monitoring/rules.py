"""The catalogue of every specserve alert and recording rule: what each one is.

Each alert is a *value query* (PromQL measuring one quantity, already gated so it is empty while
the server is idle), a comparison, a threshold, a severity, its switches (`for`, rate window,
named thresholds) and its runbook. Nothing here renders: `expansion` turns the placeholders into
concrete PromQL, `prometheus` writes the rule file, `grafana_alerting`, `dashboard` and `helm`
render the same entries for their consumers. Nothing is written twice.

Placeholders in expressions and annotation templates:
- `[[name]]` is the alert's threshold `name` (number, regex, label list or metric name);
- `[[window]]` is the rate window (a Prometheus duration) of the alert, or of the recording rule
  being rendered;
- `[[rule:family]]` is a recording rule family at the alert's window: `family` + window is its
  name in Prometheus rule files (`...:mean` + `2m`), its expression (with that window) inlined
  where recording rules may not be loaded (Grafana alerts, dashboards).
`[[` never occurs in PromQL or in Prometheus/Grafana templates, so the markers cannot collide.

Windows: every alert built on a rate has its own `window` (overridable like `for`). Recording
rules exist once per (family, window) that an enabled alert needs, plus always at
RECORDING_WINDOW, so `...:mean5m` and friends can be relied on by other dashboards.

Metric names come from the exporter's own table (`specserve_exporter.names`) and, for metrics
other exporters serve, from `specserve.monitoring.metrics`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from specserve.monitoring.metrics import SGLANG_RUNNING_REQUESTS, UP
from specserve_exporter.names import (
    BASELINE_GEN_THROUGHPUT,
    DECODE_ACCEPT_LENGTH,
    DECODE_GEN_THROUGHPUT,
    DECODE_GRAPH_ENABLED,
    DECODE_LAST_LINE_TIMESTAMP,
    DECODE_QUEUED_REQUESTS,
    DECODE_TOKEN_USAGE,
    LOG_FILE_GAPS,
    LOG_LINES_PARSED,
    LOG_LINES_REJECTED,
    PREFIX,
    SOURCE_UP,
)

ThresholdKind = Literal["number", "regex", "labels", "metric"]
Severity = Literal["critical", "warning"]
Comparison = Literal["<", ">"]

SERVICE_LABEL = "specserve"
# The window every recording rule family is always recorded at (docs/alerts.md).
RECORDING_WINDOW = "5m"
# The placeholder name of the rate window; reserved, never a threshold name.
WINDOW = "window"
# The lead sets the real repository URL; Ansible and Helm pass their own with runbook_base_url.
DEFAULT_RUNBOOK_BASE_URL = "https://github.com/specserve/specserve/blob/main/docs/runbooks"


@dataclass(frozen=True)
class Threshold:
    """A named, overridable parameter of one alert."""

    name: str
    default: float | str
    kind: ThresholdKind
    help: str
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class RecordingRule:
    """A family of recording rules: `family` + window is the record name, e.g. `...:mean2m`."""

    family: str
    expr: str
    help: str

    def record(self, window: str) -> str:
        return f"{self.family}{window}"


@dataclass(frozen=True)
class Alert:
    name: str
    severity: Severity
    for_: str
    value_expr: str
    comparison: Comparison
    # The overridable threshold the value is compared with, or a fixed number for alerts on
    # 0/1 gauges and counters.
    compare_to: Threshold | float
    summary: str
    description: str
    meaning: str
    # Thresholds the value query itself reads (`[[name]]`), besides the compared one.
    query_thresholds: tuple[Threshold, ...] = field(default_factory=tuple)
    # Default rate window; None for alerts that read gauges or `up` directly (no rate).
    window: str | None = None

    @property
    def runbook_slug(self) -> str:
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", self.name).lower()

    @property
    def thresholds(self) -> tuple[Threshold, ...]:
        """Every overridable threshold, the compared one first."""
        if isinstance(self.compare_to, Threshold):
            return (self.compare_to, *self.query_thresholds)
        return self.query_thresholds

    @property
    def labels(self) -> dict[str, str]:
        return {"severity": self.severity, "service": SERVICE_LABEL}

    def runbook_url(self, base_url: str) -> str:
        return f"{base_url.rstrip('/')}/{self.runbook_slug}.md"

    def threshold(self, name: str) -> Threshold:
        for item in self.thresholds:
            if item.name == name:
                return item
        raise KeyError(f"alert {self.name} has no threshold {name!r}")


# --- recording rules ------------------------------------------------------------------------
# Aggregations use `without (dp, tp, pp)` so every target label (job, instance, and on Kubernetes
# namespace/pod/service) survives and series of one target match one-to-one.

# Family names: the record name is the family followed by the window (`...:mean5m`).
ACCEPT_LENGTH_MEAN = f"instance:{DECODE_ACCEPT_LENGTH.name}:mean"
THROUGHPUT_MEAN = f"instance_concurrency:{DECODE_GEN_THROUGHPUT.name}:mean"
SPEEDUP_RATIO = f"instance_concurrency:{PREFIX}decode_gen_throughput_over_baseline:ratio"
DECODE_LINE_RATE = f"instance:{LOG_LINES_PARSED.name}_decode:rate"
REJECTED_RATIO = f"instance:{LOG_LINES_REJECTED.name}:ratio_rate"

RECORDING_RULES: tuple[RecordingRule, ...] = (
    RecordingRule(
        family=ACCEPT_LENGTH_MEAN,
        # `> 0` on the denominator: no decode line in the window gives no series, not NaN.
        expr=(
            f"sum without (dp, tp, pp) (rate({DECODE_ACCEPT_LENGTH.sum}[[[window]]]))\n"
            "/\n"
            "(sum without (dp, tp, pp) "
            f"(rate({DECODE_ACCEPT_LENGTH.count}[[[window]]])) > 0)"
        ),
        help="Mean accept length of the decode windows logged in the rate window, over all "
        "printing ranks; absent while no speculative decode line was logged.",
    ),
    RecordingRule(
        family=THROUGHPUT_MEAN,
        # Each DP rank prints its own share of the decode rate: mean per rank, then sum the ranks.
        expr=(
            "sum without (dp) (\n"
            "  sum without (tp, pp) "
            f"(rate({DECODE_GEN_THROUGHPUT.sum}[[[window]]]))\n"
            "  /\n"
            "  (sum without (tp, pp) "
            f"(rate({DECODE_GEN_THROUGHPUT.count}[[[window]]])) > 0)\n"
            ")"
        ),
        help="Mean decode throughput (tokens/s, whole server: DP ranks summed) of the windows "
        "logged in the rate window, per concurrency bucket; absent while idle.",
    ),
    RecordingRule(
        family=SPEEDUP_RATIO,
        expr=(
            f"[[rule:{THROUGHPUT_MEAN}]]\n"
            "/ on (job, instance, concurrency)\n"
            "max by (job, instance, concurrency) "
            f"({BASELINE_GEN_THROUGHPUT.name} > 0)"
        ),
        help="Speculative decode throughput divided by the non-speculative baseline measured at "
        "the same concurrency bucket; only buckets that have a baseline and recent decode lines.",
    ),
    RecordingRule(
        family=DECODE_LINE_RATE,
        expr=(
            "sum without (kind, dp, tp, pp) "
            f'(rate({LOG_LINES_PARSED.total}{{kind="decode"}}[[[window]]]))'
        ),
        help="Decode stats lines parsed per second over the rate window: above zero means the "
        "server is decoding.",
    ),
    RecordingRule(
        family=REJECTED_RATIO,
        # `or R * 0`: when every stats line is rejected the parsed counter may not exist at all,
        # and that is exactly the case the ratio must show as 1.
        expr=(
            "sum without (reason, dp, tp, pp) "
            f"(rate({LOG_LINES_REJECTED.total}[[[window]]]))\n"
            "/\n"
            "(\n"
            "  sum without (reason, dp, tp, pp) "
            f"(rate({LOG_LINES_REJECTED.total}[[[window]]]))\n"
            "  + (\n"
            "    sum without (kind, dp, tp, pp) "
            f"(rate({LOG_LINES_PARSED.total}[[[window]]]))\n"
            "    or\n"
            "    sum without (reason, dp, tp, pp) "
            f"(rate({LOG_LINES_REJECTED.total}[[[window]]])) * 0\n"
            "  )\n"
            "  > 0\n"
            ")"
        ),
        help="Share of stats lines (decode and prefill) the exporter could not parse over the "
        "rate window; absent while no line was rejected.",
    ),
)

_WHILE_DECODING = f"and on (job, instance)\n([[rule:{DECODE_LINE_RATE}]] > 0)"

ALERTS: tuple[Alert, ...] = (
    Alert(
        name="SpecDecodeBelowBaseline",
        severity="warning",
        for_="15m",
        window="5m",
        value_expr=f"[[rule:{SPEEDUP_RATIO}]]",
        comparison="<",
        compare_to=Threshold(
            "tolerance", 1.0, "number",
            "Fraction of the baseline below which the alert fires (0.9 = fire under 90%).",
            minimum=0.0, maximum=10.0,
        ),
        summary="Speculative decoding is slower than the non-speculative baseline",
        description=(
            "On {{ $labels.instance }} at concurrency bucket {{ $labels.concurrency }}, "
            "speculative decode throughput ([[window]] window mean) is "
            "{{ $value | humanizePercentage }} of the baseline measured without speculation at "
            "the same bucket (alert below "
            "[[tolerance]] times the baseline). Speculation is costing throughput instead of "
            "adding it."
        ),
        meaning="Window-mean decode throughput is below the measured non-speculative baseline "
        "at the same concurrency bucket. Never fires while idle, nor for a bucket that has no "
        "baseline.",
    ),
    Alert(
        name="SpecDecodeDraftsRejected",
        severity="critical",
        for_="2m",
        window="2m",
        value_expr=f"[[rule:{ACCEPT_LENGTH_MEAN}]]",
        comparison="<",
        compare_to=Threshold(
            "max_accept_length", 1.05, "number",
            "Mean accept length below which drafts count as rejected.",
            minimum=1.0, maximum=2.0,
        ),
        summary="The target rejects almost every drafted token (accept length near 1.0)",
        description=(
            "Mean accept length on {{ $labels.instance }} over [[window]] is "
            '{{ $value | printf "%.3f" }} (alert below [[max_accept_length]]; 1.000 means no '
            "draft token is accepted). This is the signature of --speculative-algorithm EAGLE "
            "with an EAGLE-3 drafter (it must be EAGLE3), or of a drafter that does not match "
            "the target."
        ),
        meaning="Accept length at or near 1.0 while decoding: every draft is rejected (EAGLE "
        "instead of EAGLE3, or a broken/mismatched drafter). Speculation only costs time.",
    ),
    Alert(
        name="SpecDecodeAcceptLengthLow",
        severity="warning",
        for_="15m",
        window="5m",
        value_expr=f"[[rule:{ACCEPT_LENGTH_MEAN}]]",
        comparison="<",
        compare_to=Threshold(
            "floor", 1.5, "number",
            "Mean accept length (bonus token included) below which speculation is assumed "
            "not to pay off.",
            minimum=1.0, maximum=64.0,
        ),
        summary="Speculative accept length is below the break-even floor",
        description=(
            "Mean accept length on {{ $labels.instance }} over [[window]] is "
            '{{ $value | printf "%.3f" }}, below the configured floor of [[floor]] tokens per '
            "verify pass; the drafter's overhead is likely no longer paid back."
        ),
        meaning="Accept length below a configurable floor (the break-even point of this "
        "deployment) while decoding.",
    ),
    Alert(
        name="SpecDecodeGraphDisabled",
        severity="warning",
        for_="5m",
        window="5m",
        value_expr=(
            f"min without (dp, tp, pp, graph) ({DECODE_GRAPH_ENABLED.name})\n"
            f"{_WHILE_DECODING}"
        ),
        comparison="<",
        compare_to=1.0,
        summary="Decoding runs without CUDA graphs",
        description=(
            "Decode lines on {{ $labels.instance }} report the graph off (cuda graph: False) "
            "while the server is decoding. Without CUDA graphs decode ran about 25% slower in "
            "the seeds (56.7 vs 74.9 tok/s)."
        ),
        meaning="A printing rank reports `cuda graph: False` (or cpu/npu/musa graph) while "
        "decoding.",
    ),
    Alert(
        name="SpecServeNoDecodeLines",
        severity="critical",
        for_="2m",
        value_expr=(
            "(time() - max without (dp, tp, pp) "
            f"({DECODE_LAST_LINE_TIMESTAMP.name}))\n"
            "and on ([[match_on]])\n"
            "(sum by ([[match_on]]) ([[running_metric]]) > 0)"
        ),
        comparison=">",
        compare_to=Threshold(
            "stale_after_seconds", 180.0, "number",
            "Seconds without a decode line before the alert condition holds.",
            minimum=1.0,
        ),
        summary="No decode line read while SGLang reports running requests",
        description=(
            "The exporter on {{ $labels.instance }} has read no decode line for "
            "{{ $value | humanizeDuration }} while [[running_metric]] reports running requests. "
            "Either the server is stuck or the exporter no longer sees its log."
        ),
        meaning="SGLang's own metrics say requests are running but no decode line was read "
        "for longer than the threshold: a stuck server or a log the exporter no longer sees. "
        "Needs SGLang's --enable-metrics (the log alone cannot tell idle from stuck).",
        query_thresholds=(
            Threshold(
                "running_metric", SGLANG_RUNNING_REQUESTS, "metric",
                "Metric that counts running requests independently of the log; SGLang "
                "refreshes it every 30 s while idle.",
            ),
            Threshold(
                "match_on", "", "labels",
                "Labels shared by the exporter's and SGLang's series (comma-separated, e.g. "
                "'namespace, pod' for a sidecar); empty when one server reports to Prometheus.",
            ),
        ),
    ),
    Alert(
        name="SpecServeLogSourceDown",
        severity="warning",
        for_="2m",
        value_expr=f"min without (dp, tp, pp) ({SOURCE_UP.name})",
        comparison="<",
        compare_to=1.0,
        summary="The exporter cannot read the SGLang log",
        description=(
            "Log source {{ $labels.source }} of the exporter on {{ $labels.instance }} is "
            "down: no decode metrics are produced, so every other specserve alert is blind."
        ),
        meaning=f"`{SOURCE_UP.name}` is 0: the log file or container stream the exporter "
        "reads is missing or unreadable.",
    ),
    Alert(
        name="SpecServeExporterDown",
        severity="warning",
        for_="5m",
        value_expr=f'{UP}{{job=~"[[job]]"}} or on () vector(0)',
        comparison="<",
        compare_to=1.0,
        summary="The specserve exporter is not scraped",
        description=(
            "Prometheus target '{{ $labels.instance }}' of job [[job]] is down or absent "
            "(an empty target means no target of that job exists). Decode metrics and every "
            "other specserve alert are blind."
        ),
        meaning="The exporter's scrape target is down, or no target of the job exists.",
        query_thresholds=(
            Threshold(
                "job", "specserve-exporter", "regex",
                "Regular expression for the exporter's Prometheus job label.",
            ),
        ),
    ),
    Alert(
        name="SpecServeLogLinesRejected",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=f"[[rule:{REJECTED_RATIO}]]",
        comparison=">",
        compare_to=Threshold(
            "max_ratio", 0.01, "number",
            "Share of stats lines rejected above which the alert fires.",
            minimum=0.0, maximum=1.0,
        ),
        summary="The exporter rejects SGLang stats lines",
        description=(
            "{{ $value | humanizePercentage }} of the stats lines read on "
            "{{ $labels.instance }} over [[window]] could not be parsed (alert above "
            "[[max_ratio]]). The SGLang log format has probably changed."
        ),
        meaning="A rising share of decode/prefill stats lines fails to parse: a new SGLang "
        "log format, or a custom logging config.",
    ),
    Alert(
        name="SpecServeLogFileGap",
        severity="warning",
        for_="1m",
        # A fixed range, not a window: windows belong to the recording-rule families. 15m keeps
        # the alert up long enough after the one counter step to be seen and routed.
        value_expr=f"sum without (dp, tp, pp) (increase({LOG_FILE_GAPS.total}[15m]))",
        comparison=">",
        compare_to=0.0,
        summary="The SGLang log file missed output",
        description=(
            "specserve-launch on {{ $labels.instance }} could not write the SGLang log file "
            "for a while ({{ $value }} gaps over 15m: full disk, read-only, directory "
            "gone): the exporter never saw that output; `docker logs` has it."
        ),
        meaning="The launcher wrote a `log file unavailable from T1 to T2, N bytes not "
        "written` marker when the file came back: metrics from that span are missing.",
    ),
    Alert(
        name="SpecDecodeQueueBacklog",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=(
            f"sum without (dp) (max without (tp, pp) ({DECODE_QUEUED_REQUESTS.name}))\n"
            f"{_WHILE_DECODING}"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_queued", 10.0, "number",
            "Queued requests above which the alert fires.",
            minimum=0.0,
        ),
        summary="Requests are queueing",
        description=(
            "{{ $value }} requests are waiting in the queue on {{ $labels.instance }} "
            "(alert above [[max_queued]]): the server is at its batch or KV-cache limit."
        ),
        meaning="Queued requests (`#queue-req`, summed over DP ranks) stay above the "
        "threshold while decoding.",
    ),
    Alert(
        name="SpecDecodeKVCacheNearFull",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=(
            f"max without (dp, tp, pp) ({DECODE_TOKEN_USAGE.name})\n"
            f"{_WHILE_DECODING}"
        ),
        comparison=">",
        compare_to=Threshold(
            "max_ratio", 0.95, "number",
            "Token usage ratio above which the alert fires.",
            minimum=0.0, maximum=1.0,
        ),
        summary="The KV cache is nearly full",
        description=(
            "KV cache token usage on {{ $labels.instance }} is "
            "{{ $value | humanizePercentage }} (alert above [[max_ratio]]); new requests "
            "queue and running ones may be retracted."
        ),
        meaning="KV-cache token usage of the fullest DP rank stays above the threshold while "
        "decoding.",
    ),
)

ALERTS_BY_NAME: dict[str, Alert] = {alert.name: alert for alert in ALERTS}
RECORDING_RULES_BY_FAMILY: dict[str, RecordingRule] = {
    rule.family: rule for rule in RECORDING_RULES
}
