"""The one source of every specserve alert and recording rule.

Each alert is a *value query* (PromQL measuring one quantity, already gated so it is empty while
the server is idle), a comparison and a threshold. Prometheus gets `(value) < threshold`;
Grafana-managed alerting gets the same value query followed by reduce and threshold expressions;
the Helm chart gets the same text with thresholds taken from values. Nothing is written twice.

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
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ThresholdKind = Literal["number", "regex", "labels", "metric"]
Severity = Literal["critical", "warning"]
Comparison = Literal["<", ">"]

RECORDING_GROUP = "specserve.recording"
ALERT_GROUP = "specserve.alerts"
SERVICE_LABEL = "specserve"
# The window every recording rule family is always recorded at (docs/alerts.md).
RECORDING_WINDOW = "5m"
WINDOW = "window"
# The lead sets the real repository URL; Ansible and Helm pass their own with runbook_base_url.
DEFAULT_RUNBOOK_BASE_URL = "https://github.com/specserve/specserve/blob/main/docs/runbooks"

_PLACEHOLDER = re.compile(r"\[\[(rule:)?([A-Za-z_:][A-Za-z0-9_:]*)\]\]")


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
    # A threshold name, or a fixed number for alerts on 0/1 gauges.
    compare_to: str | float
    summary: str
    description: str
    meaning: str
    thresholds: tuple[Threshold, ...] = field(default_factory=tuple)
    # Default rate window; None for alerts that read gauges or `up` directly (no rate).
    window: str | None = None

    @property
    def runbook_slug(self) -> str:
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", self.name).lower()

    def threshold(self, name: str) -> Threshold:
        for item in self.thresholds:
            if item.name == name:
                return item
        raise KeyError(f"alert {self.name} has no threshold {name!r}")


# --- recording rules ------------------------------------------------------------------------
# Aggregations use `without (dp, tp, pp)` so every target label (job, instance, and on Kubernetes
# namespace/pod/service) survives and series of one target match one-to-one.

# Family names: the record name is the family followed by the window (`...:mean5m`).
ACCEPT_LENGTH_MEAN = "instance:specserve_decode_accept_length:mean"
THROUGHPUT_MEAN = "instance_concurrency:specserve_decode_gen_throughput_tokens_per_second:mean"
SPEEDUP_RATIO = "instance_concurrency:specserve_decode_gen_throughput_over_baseline:ratio"
DECODE_LINE_RATE = "instance:specserve_log_lines_parsed_decode:rate"
REJECTED_RATIO = "instance:specserve_log_lines_rejected:ratio_rate"

RECORDING_RULES: tuple[RecordingRule, ...] = (
    RecordingRule(
        family=ACCEPT_LENGTH_MEAN,
        # `> 0` on the denominator: no decode line in the window gives no series, not NaN.
        expr=(
            "sum without (dp, tp, pp) (rate(specserve_decode_accept_length_sum[[[window]]]))\n"
            "/\n"
            "(sum without (dp, tp, pp) "
            "(rate(specserve_decode_accept_length_count[[[window]]])) > 0)"
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
            "(rate(specserve_decode_gen_throughput_tokens_per_second_sum[[[window]]]))\n"
            "  /\n"
            "  (sum without (tp, pp) "
            "(rate(specserve_decode_gen_throughput_tokens_per_second_count[[[window]]])) > 0)\n"
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
            "(specserve_baseline_gen_throughput_tokens_per_second > 0)"
        ),
        help="Speculative decode throughput divided by the non-speculative baseline measured at "
        "the same concurrency bucket; only buckets that have a baseline and recent decode lines.",
    ),
    RecordingRule(
        family=DECODE_LINE_RATE,
        expr=(
            "sum without (kind, dp, tp, pp) "
            '(rate(specserve_log_lines_parsed_total{kind="decode"}[[[window]]]))'
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
            "(rate(specserve_log_lines_rejected_total[[[window]]]))\n"
            "/\n"
            "(\n"
            "  sum without (reason, dp, tp, pp) "
            "(rate(specserve_log_lines_rejected_total[[[window]]]))\n"
            "  + (\n"
            "    sum without (kind, dp, tp, pp) "
            "(rate(specserve_log_lines_parsed_total[[[window]]]))\n"
            "    or\n"
            "    sum without (reason, dp, tp, pp) "
            "(rate(specserve_log_lines_rejected_total[[[window]]])) * 0\n"
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
        compare_to="tolerance",
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
        thresholds=(
            Threshold(
                "tolerance", 1.0, "number",
                "Fraction of the baseline below which the alert fires (0.9 = fire under 90%).",
                minimum=0.0, maximum=10.0,
            ),
        ),
    ),
    Alert(
        name="SpecDecodeDraftsRejected",
        severity="critical",
        for_="2m",
        window="2m",
        value_expr=f"[[rule:{ACCEPT_LENGTH_MEAN}]]",
        comparison="<",
        compare_to="max_accept_length",
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
        thresholds=(
            Threshold(
                "max_accept_length", 1.05, "number",
                "Mean accept length below which drafts count as rejected.",
                minimum=1.0, maximum=2.0,
            ),
        ),
    ),
    Alert(
        name="SpecDecodeAcceptLengthLow",
        severity="warning",
        for_="15m",
        window="5m",
        value_expr=f"[[rule:{ACCEPT_LENGTH_MEAN}]]",
        comparison="<",
        compare_to="floor",
        summary="Speculative accept length is below the break-even floor",
        description=(
            "Mean accept length on {{ $labels.instance }} over [[window]] is "
            '{{ $value | printf "%.3f" }}, below the configured floor of [[floor]] tokens per '
            "verify pass; the drafter's overhead is likely no longer paid back."
        ),
        meaning="Accept length below a configurable floor (the break-even point of this "
        "deployment) while decoding.",
        thresholds=(
            Threshold(
                "floor", 1.5, "number",
                "Mean accept length (bonus token included) below which speculation is assumed "
                "not to pay off.",
                minimum=1.0, maximum=64.0,
            ),
        ),
    ),
    Alert(
        name="SpecDecodeGraphDisabled",
        severity="warning",
        for_="5m",
        window="5m",
        value_expr=(
            "min without (dp, tp, pp, graph) (specserve_decode_graph_enabled)\n"
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
            "(specserve_decode_last_line_timestamp_seconds))\n"
            "and on ([[match_on]])\n"
            "(sum by ([[match_on]]) ([[running_metric]]) > 0)"
        ),
        comparison=">",
        compare_to="stale_after_seconds",
        summary="No decode line read while SGLang reports running requests",
        description=(
            "The exporter on {{ $labels.instance }} has read no decode line for "
            "{{ $value | humanizeDuration }} while [[running_metric]] reports running requests. "
            "Either the server is stuck or the exporter no longer sees its log."
        ),
        meaning="SGLang's own metrics say requests are running but no decode line was read "
        "for longer than the threshold: a stuck server or a log the exporter no longer sees. "
        "Needs SGLang's --enable-metrics (the log alone cannot tell idle from stuck).",
        thresholds=(
            Threshold(
                "stale_after_seconds", 180.0, "number",
                "Seconds without a decode line before the alert condition holds.",
                minimum=1.0,
            ),
            Threshold(
                "running_metric", "sglang:num_running_reqs", "metric",
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
        value_expr="min without (dp, tp, pp) (specserve_source_up)",
        comparison="<",
        compare_to=1.0,
        summary="The exporter cannot read the SGLang log",
        description=(
            "Log source {{ $labels.source }} of the exporter on {{ $labels.instance }} is "
            "down: no decode metrics are produced, so every other specserve alert is blind."
        ),
        meaning="`specserve_source_up` is 0: the log file or container stream the exporter "
        "reads is missing or unreadable.",
    ),
    Alert(
        name="SpecServeExporterDown",
        severity="warning",
        for_="5m",
        value_expr='up{job=~"[[job]]"} or on () vector(0)',
        comparison="<",
        compare_to=1.0,
        summary="The specserve exporter is not scraped",
        description=(
            "Prometheus target '{{ $labels.instance }}' of job [[job]] is down or absent "
            "(an empty target means no target of that job exists). Decode metrics and every "
            "other specserve alert are blind."
        ),
        meaning="The exporter's scrape target is down, or no target of the job exists.",
        thresholds=(
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
        compare_to="max_ratio",
        summary="The exporter rejects SGLang stats lines",
        description=(
            "{{ $value | humanizePercentage }} of the stats lines read on "
            "{{ $labels.instance }} over [[window]] could not be parsed (alert above "
            "[[max_ratio]]). The SGLang log format has probably changed."
        ),
        meaning="A rising share of decode/prefill stats lines fails to parse: a new SGLang "
        "log format, or a custom logging config.",
        thresholds=(
            Threshold(
                "max_ratio", 0.01, "number",
                "Share of stats lines rejected above which the alert fires.",
                minimum=0.0, maximum=1.0,
            ),
        ),
    ),
    Alert(
        name="SpecServeLogFileGap",
        severity="warning",
        for_="1m",
        # A fixed range, not a window: windows belong to the recording-rule families. 15m keeps
        # the alert up long enough after the one counter step to be seen and routed.
        value_expr="sum without (dp, tp, pp) (increase(specserve_log_file_gaps_total[15m]))",
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
            "sum without (dp) (max without (tp, pp) (specserve_decode_queued_requests))\n"
            f"{_WHILE_DECODING}"
        ),
        comparison=">",
        compare_to="max_queued",
        summary="Requests are queueing",
        description=(
            "{{ $value }} requests are waiting in the queue on {{ $labels.instance }} "
            "(alert above [[max_queued]]): the server is at its batch or KV-cache limit."
        ),
        meaning="Queued requests (`#queue-req`, summed over DP ranks) stay above the "
        "threshold while decoding.",
        thresholds=(
            Threshold(
                "max_queued", 10.0, "number",
                "Queued requests above which the alert fires.",
                minimum=0.0,
            ),
        ),
    ),
    Alert(
        name="SpecDecodeKVCacheNearFull",
        severity="warning",
        for_="10m",
        window="5m",
        value_expr=(
            "max without (dp, tp, pp) (specserve_decode_token_usage_ratio)\n"
            f"{_WHILE_DECODING}"
        ),
        comparison=">",
        compare_to="max_ratio",
        summary="The KV cache is nearly full",
        description=(
            "KV cache token usage on {{ $labels.instance }} is "
            "{{ $value | humanizePercentage }} (alert above [[max_ratio]]); new requests "
            "queue and running ones may be retracted."
        ),
        meaning="KV-cache token usage of the fullest DP rank stays above the threshold while "
        "decoding.",
        thresholds=(
            Threshold(
                "max_ratio", 0.95, "number",
                "Token usage ratio above which the alert fires.",
                minimum=0.0, maximum=1.0,
            ),
        ),
    ),
)

ALERTS_BY_NAME: dict[str, Alert] = {alert.name: alert for alert in ALERTS}
RECORDING_RULES_BY_FAMILY: dict[str, RecordingRule] = {
    rule.family: rule for rule in RECORDING_RULES
}


# --- rendering ------------------------------------------------------------------------------


def format_number(value: float) -> str:
    """Shortest text PromQL and Go templates both print for `value` (1.0 -> '1', 1.05 -> '1.05')."""
    if not math.isfinite(value):
        raise ValueError(f"threshold must be a finite number, got {value!r}")
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def format_threshold(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return format_number(value)


def expand(
    text: str,
    *,
    threshold: Callable[[str], str],
    rule: Callable[[str], str],
) -> str:
    """Replace `[[name]]` with `threshold(name)` and `[[rule:family]]` with `rule(family)`."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return rule(match.group(2))
        return threshold(match.group(2))

    return _PLACEHOLDER.sub(replace, text)


def _family(name: str) -> RecordingRule:
    if name not in RECORDING_RULES_BY_FAMILY:
        raise KeyError(f"unknown recording rule family [[rule:{name}]]")
    return RECORDING_RULES_BY_FAMILY[name]


def families_in(text: str) -> list[str]:
    """Recording rule families `text` refers to, directly or through other families."""
    found: list[str] = []
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) and match.group(2) not in found:
            found.append(match.group(2))
            found.extend(f for f in families_in(_family(match.group(2)).expr) if f not in found)
    return found


def window_only(window: str) -> Callable[[str], str]:
    """The threshold callback of a recording rule: it knows its window and nothing else."""

    def threshold(name: str) -> str:
        if name != WINDOW:
            raise KeyError(f"recording rules take no thresholds, found [[{name}]]")
        return window

    return threshold


def rule_names(window: str) -> Callable[[str], str]:
    """Recording rule families as Prometheus rule files refer to them: by name, at `window`."""
    return lambda name: _family(name).record(window)


def inline_rules(window: str) -> Callable[[str], str]:
    """Recording rule families as their expressions at `window`, parenthesised, nested inlined."""

    def inline(name: str) -> str:
        body = expand(_family(name).expr, threshold=window_only(window), rule=inline)
        indented = "\n".join(f"  {line}" for line in body.splitlines())
        return f"(\n{indented}\n)"

    return inline


def inline_rule(name: str, window: str) -> str:
    return inline_rules(window)(name)


def recording_expr(rule: RecordingRule, window: str, *, inline: bool = False) -> str:
    refer = inline_rules(window) if inline else rule_names(window)
    return expand(rule.expr, threshold=window_only(window), rule=refer)


def _check_definitions() -> None:
    # Caught at import, so a rule edited without a window (or with a stray one) never renders.
    for alert in ALERTS:
        uses_rate = bool(families_in(alert.value_expr))
        if uses_rate != (alert.window is not None):
            raise ValueError(f"{alert.name}: window must be set exactly when it uses a rate")
        if any(item.name == WINDOW for item in alert.thresholds):
            raise ValueError(f"{alert.name}: {WINDOW!r} is reserved, not a threshold name")


_check_definitions()


@dataclass(frozen=True)
class AlertSettings:
    """One alert's effective settings after overrides."""

    enabled: bool
    for_: str
    thresholds: Mapping[str, float | str]
    window: str | None = None

    def threshold_text(self, name: str) -> str:
        if name == WINDOW and self.window is not None:
            return self.window
        if name not in self.thresholds:
            raise KeyError(f"template names unknown threshold [[{name}]]")
        return format_threshold(self.thresholds[name])


def default_settings(alert: Alert) -> AlertSettings:
    return AlertSettings(
        enabled=True,
        for_=alert.for_,
        thresholds={item.name: item.default for item in alert.thresholds},
        window=alert.window,
    )


def compare_text(alert: Alert, threshold: Callable[[str], str]) -> str:
    if isinstance(alert.compare_to, str):
        return threshold(alert.compare_to)
    return format_number(alert.compare_to)


def _windowed(threshold: Callable[[str], str], *, inline: bool) -> Callable[[str], str]:
    # Lazy: alerts without a rate never ask for their (absent) window.
    def refer(name: str) -> str:
        window = threshold(WINDOW)
        return inline_rules(window)(name) if inline else rule_names(window)(name)

    return refer


def alert_value_expr(
    alert: Alert, threshold: Callable[[str], str], *, inline: bool = False
) -> str:
    return expand(alert.value_expr, threshold=threshold, rule=_windowed(threshold, inline=inline))


def alert_expr(alert: Alert, threshold: Callable[[str], str], *, inline: bool = False) -> str:
    """`(value query) <op> <threshold>`: the parentheses keep `and`/`or` inside the value."""
    value = alert_value_expr(alert, threshold, inline=inline)
    limit = compare_text(alert, threshold)
    if "\n" not in value and " and " not in value and " or " not in value:
        return f"{value} {alert.comparison} {limit}"
    body = "\n".join(f"  {line}" for line in value.splitlines())
    return f"(\n{body}\n)\n{alert.comparison} {limit}"


def alert_labels(alert: Alert) -> dict[str, str]:
    return {"severity": alert.severity, "service": SERVICE_LABEL}


def runbook_url(alert: Alert, base_url: str) -> str:
    return f"{base_url.rstrip('/')}/{alert.runbook_slug}.md"


def alert_annotations(
    alert: Alert, threshold: Callable[[str], str], base_url: str
) -> dict[str, str]:
    refer = _windowed(threshold, inline=False)
    return {
        "summary": expand(alert.summary, threshold=threshold, rule=refer),
        "description": expand(alert.description, threshold=threshold, rule=refer),
        "runbook_url": runbook_url(alert, base_url),
    }


def recording_windows(settings: Mapping[str, AlertSettings]) -> dict[str, list[str]]:
    """Family -> the windows it is recorded at: RECORDING_WINDOW plus every enabled alert's
    window where that alert needs the family. Sorted as text, as Helm's `sortAlpha` sorts."""
    windows = {rule.family: {RECORDING_WINDOW} for rule in RECORDING_RULES}
    for alert in ALERTS:
        effective = settings[alert.name]
        if effective.enabled and effective.window is not None:
            for family in families_in(alert.value_expr):
                windows[family].add(effective.window)
    return {family: sorted(found) for family, found in windows.items()}


def render_rules(
    overrides: Mapping[str, Any] | None = None,
    runbook_base_url: str = DEFAULT_RUNBOOK_BASE_URL,
) -> dict[str, Any]:
    """The Prometheus rule file (as a dict) with `overrides` applied.

    `overrides` maps alert names to `{"enabled": bool, "for": "5m", "window": "2m",
    "thresholds": {...}}`; it is validated first and every problem is reported at once
    (OverridesError).
    """
    from specserve.monitoring.overrides import resolve_settings

    settings = resolve_settings(overrides or {})
    windows = recording_windows(settings)
    records = [
        {"record": rule.record(window), "expr": recording_expr(rule, window)}
        for rule in RECORDING_RULES
        for window in windows[rule.family]
    ]
    alerts: list[dict[str, Any]] = []
    for alert in ALERTS:
        effective = settings[alert.name]
        if not effective.enabled:
            continue
        alerts.append(
            {
                "alert": alert.name,
                "expr": alert_expr(alert, effective.threshold_text),
                "for": effective.for_,
                "labels": alert_labels(alert),
                "annotations": alert_annotations(alert, effective.threshold_text, runbook_base_url),
            }
        )
    groups: list[dict[str, Any]] = [{"name": RECORDING_GROUP, "rules": records}]
    if alerts:
        groups.append({"name": ALERT_GROUP, "rules": alerts})
    return {"groups": groups}
