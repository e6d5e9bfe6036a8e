"""Service level objectives as data: what each SLO counts, its target and window, the burn rates.

An objective is a share of good events over a period (the SLO window): time to first token and
inter-token latency under a threshold, from SGLang's own histograms, and availability, the
share of the router's requests answered without a 5xx. `1 - target` is the error budget.

The burn rate of a window is its error ratio over the budget: 1 spends the budget exactly in the
period, 14.4 spends 2% of a 30-day budget in an hour. The alerts are the Google SRE workbook's
(chapter 5, "Alerting on SLOs", table 5-8) multi-window, multi-burn-rate pairs: a long window
that says the burn is significant and a short one (1/12 of it) that says it is still going on,
so the alert resets minutes after the burn stops. Page at 14.4x over 1h and 5m or 6x over 6h and
30m, ticket at 1x over 3d and 6h.

Settings come from the same overrides file as the alerts' (`slos:` beside `alerts:`; validated
by specserve.monitoring.overrides) and the chart's `prometheusRule.slos`: this module renders
the recording rules with a `setting` callback (a number for Prometheus, a Helm values action
for the chart) so both give
the same rule text.

Latency thresholds must be bounds of SGLang's default buckets (tests/contract-style check in
tests/monitoring/test_slo.py reads them from SGLang's code): a bucket bound counts exactly, a
threshold between two bounds could only be interpolated, which a ratio of counters cannot do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specserve.monitoring.metrics import (
    ROUTER_REQUESTS,
    ROUTER_UPSTREAM_RESPONSES,
    ROUTER_WORKER_RETRIES,
    SGLANG_INTER_TOKEN_LATENCY,
    SGLANG_TIME_TO_FIRST_TOKEN,
)
from specserve.profile.classlabel import RULES_CLASS_LABEL

# The windows the error ratios are recorded at: every window a burn-rate pair reads.
SLO_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
# Replica labels (rules._REPLICA): a fleet series drops exactly these.
REPLICA_LABELS = "instance, pod"

ERROR_RATIO = "slo:sli_error:ratio_rate"
FLEET_ERROR_RATIO = "fleet_slo:sli_error:ratio_rate"
ERROR_BUDGET = "slo:error_budget:ratio"
BUDGET_REMAINING = "slo:error_budget_remaining:ratio"
FLEET_BUDGET_REMAINING = "fleet_slo:error_budget_remaining:ratio"

# The setting keys of one objective, as the overrides file and the chart values spell them.
SETTING_KEYS = ("enabled", "target", "period", "threshold_seconds")


@dataclass(frozen=True)
class BurnRate:
    """One workbook row: fire when both windows burn faster than `factor`."""

    severity: str
    long: str
    short: str
    factor: float


BURN_RATES: tuple[BurnRate, ...] = (
    BurnRate("critical", "1h", "5m", 14.4),
    BurnRate("critical", "6h", "30m", 6.0),
    BurnRate("warning", "3d", "6h", 1.0),
)

# SGLang's default bucket bounds (TokenizerMetricsCollector, 0.5.21 and 0.5.23 alike).
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0,
                80.0, 100.0, 200.0, 400.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)


@dataclass(frozen=True)
class Objective:
    name: str
    title: str
    target: float
    period: str
    help: str
    # Latency objectives: the histogram, its per-request labels, the default threshold and the
    # bounds it may take. Availability: None.
    histogram: str | None = None
    per_request: str = ""
    threshold_seconds: float | None = None
    buckets: tuple[float, ...] = ()

    def bad_over_total(self, window: str, setting: Callable[[str], str], drop: str = "") -> str:
        """The share of bad events in `window`, per scrape target; `drop` names more labels
        summed away (the replica labels, for a fleet)."""
        extra = f"{drop}, " if drop else ""
        if self.histogram is None:
            # Failed requests: 5xx responses less the retries that followed one. smg counts a
            # response per attempt (a request retried on failing workers adds several 5xx), and
            # a retry per attempt after the first (tests/monitoring/test_router_metrics.py); a
            # request the router refuses itself (503 no_available_workers) is one 5xx. Not its
            # requests less its answers: a request still streaming, or one the router answers
            # itself (no upstream response), would count as failed, which on a quiet fleet read
            # as a burn with nothing failing.
            total = (f"sum without ({extra}backend_type, connection_mode, model, endpoint, "
                     f"streaming) (rate({ROUTER_REQUESTS}[{window}]))")
            failed = (f"sum without ({extra}status_code, error_code) "
                      f'(rate({ROUTER_UPSTREAM_RESPONSES}{{status_code=~"5.."}}[{window}]))')
            retried = (f"sum without ({extra}worker_type, endpoint) "
                       f"(rate({ROUTER_WORKER_RETRIES}[{window}]))")
            return (
                # group_left keeps the responses' router_type (the retries have none).
                f"clamp_min(\n  (\n    {failed}\n    - ignoring (router_type) group_left () (\n"
                f"      {retried}\n      or ignoring (router_type)\n      {failed} * 0\n"
                f"    )\n  )\n  or\n  {total} * 0,\n  0\n)\n/\n({total} > 0)"
            )
        # `le=~"X(\.0)?"`: exposition and Prometheus 3 print integer bounds as "2.0", a threshold
        # is written as "2"; no other bound of either preset matches the pattern.
        good = (f"sum without ({extra}{self.per_request}, le) (rate({self.histogram}_bucket"
                f'{{le=~"{setting("threshold_seconds")}(\\\\.0)?"}}[{window}]))')
        total = (f"sum without ({extra}{self.per_request}) "
                 f"(rate({self.histogram}_count[{window}]))")
        return f"(\n  {total}\n  -\n  {good}\n)\n/\n({total} > 0)"


OBJECTIVES: tuple[Objective, ...] = (
    Objective(
        name="ttft",
        title="Time to first token",
        target=0.95,
        period="28d",
        histogram=SGLANG_TIME_TO_FIRST_TOKEN,
        per_request=f"is_streaming, priority, {RULES_CLASS_LABEL}",
        threshold_seconds=2.0,
        buckets=TTFT_BUCKETS,
        help="Share of requests whose first token came within threshold_seconds (SGLang's "
        "time_to_first_token_seconds, streaming and not).",
    ),
    Objective(
        name="itl",
        title="Inter-token latency",
        target=0.95,
        period="28d",
        histogram=SGLANG_INTER_TOKEN_LATENCY,
        per_request=f"priority, {RULES_CLASS_LABEL}",
        threshold_seconds=0.1,
        buckets=ITL_BUCKETS,
        help="Share of output intervals (each divided by its new tokens, as SGLang observes "
        "them) within threshold_seconds (SGLang's inter_token_latency_seconds).",
    ),
    Objective(
        name="availability",
        title="Availability",
        target=0.99,
        period="28d",
        help="Share of the router's requests (smg's requests_total) that did not fail: failed "
        "are its 5xx responses (upstream_responses_total) less the retries that followed one "
        "(worker_retries_total), so a request retried on failing workers counts once and one "
        "the router refused counts too; fleet only, the router does not tell which worker "
        "answered.",
    ),
)
OBJECTIVES_BY_NAME: dict[str, Objective] = {o.name: o for o in OBJECTIVES}


def record_labels(objective: Objective) -> dict[str, str]:
    """The static labels of an objective's records: which objective a series measures."""
    return {"slo": objective.name}


def objective_records(
    objective: Objective, setting: Callable[[str], str]
) -> list[tuple[str, str]]:
    """(record, expr) of one objective, in file order, each recorded with the label
    `slo: <objective name>` (record_labels); `setting(key)` gives a setting's text
    (target, period, threshold_seconds). The budget; the error ratios at SLO_WINDOWS and at the
    period, per replica (latency only) and per fleet (the router is one per fleet: availability
    is fleet only); what is left of the budget over the period."""
    period = setting("period")
    records: list[tuple[str, str]] = [
        # `1 - target` evaluated by Prometheus: the chart's template cannot subtract floats
        # exactly, and both renderers must give the same text.
        (ERROR_BUDGET, f'vector(1 - {setting("target")})'),
    ]
    for window in (*SLO_WINDOWS, period):
        if objective.histogram is not None:
            records.append((f"{ERROR_RATIO}{window}", objective.bad_over_total(window, setting)))
        fleet = objective.bad_over_total(window, setting, REPLICA_LABELS)
        records.append((f"{FLEET_ERROR_RATIO}{window}", fleet))
    for ratio, remaining in ((ERROR_RATIO, BUDGET_REMAINING),
                             (FLEET_ERROR_RATIO, FLEET_BUDGET_REMAINING)):
        if ratio == ERROR_RATIO and objective.histogram is None:
            continue
        records.append((remaining, (
            f'1 - {ratio}{period}{{slo="{objective.name}"}}\n'
            f"/ on (slo) group_left ()\n{ERROR_BUDGET}"
        )))
    return records


def _burn(ratio: str, window: str, factor: float) -> str:
    return f"{ratio}{window}\n/ on (slo) group_left ()\n{ERROR_BUDGET}\n> {factor:g}"


def burn_expr(severity: str) -> str:
    """The value query of the burn-rate alert of `severity`: the long window's burn rate where
    it and the short window's both exceed a pair's factor, per replica and per fleet."""
    pairs: list[str] = []
    for ratio in (ERROR_RATIO, FLEET_ERROR_RATIO):
        for rate in BURN_RATES:
            if rate.severity != severity:
                continue
            long = _burn(ratio, rate.long, rate.factor).replace("\n", "\n  ")
            short = _burn(ratio, rate.short, rate.factor).replace("\n", "\n  ")
            pairs.append(f"(\n  {long}\n  and\n  {short}\n)")
    return "\nor\n".join(pairs)


# The ticket is silent while the page's condition holds for the same objective and scope: a
# slower burn of what already pages is no news. Alertmanager inhibits it (its example's
# inhibit rule, specserve.monitoring.alertmanager); Grafana's own Alertmanager has no
# inhibitions, so the Grafana-managed ticket's query leaves those series out (inline_burn_expr).
SILENCED_BY: dict[str, str] = {"warning": "critical"}


def scopes(objective: Objective) -> tuple[str, ...]:
    """`drop` of bad_over_total per scope an objective is measured at, in the records' order:
    per replica ("": latency only, the router does not say which worker answered) and per
    fleet (the replica labels summed away)."""
    return ("", REPLICA_LABELS) if objective.histogram is not None else (REPLICA_LABELS,)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _inline_pairs(
    objective: Objective, setting: Callable[[str], str], severity: str,
    rates: Sequence[BurnRate],
) -> str:
    """burn_expr's pairs of one objective, each record inlined: its error ratio over the
    budget `1 - target` (Prometheus computes it, as the budget record does)."""
    budget = f"(1 - {setting('target')})"
    pairs: list[str] = []
    for drop in scopes(objective):
        for rate in rates:
            if rate.severity != severity:
                continue
            long, short = (
                f"(\n{_indent(objective.bad_over_total(window, setting, drop))}\n)\n"
                f"/ {budget}\n> {rate.factor:g}"
                for window in (rate.long, rate.short)
            )
            pairs.append(f"(\n{_indent(long)}\n  and\n{_indent(short)}\n)")
    return "\nor\n".join(pairs)


# What joins the objectives' parts of an inlined burn-rate query (the chart's template joins
# its enabled objectives' parts with the same text).
BURN_JOIN = "\nor\n"


def inline_burn_part(
    severity: str,
    objective: Objective,
    setting: Callable[[str], str],
    rates: Sequence[BurnRate] = BURN_RATES,
) -> str:
    """One objective's part of inline_burn_expr: its pairs, the silencing severity's series left
    out, labelled with its `slo`."""
    body = _inline_pairs(objective, setting, severity, rates)
    silencer = SILENCED_BY.get(severity)
    if silencer is not None:
        page = _inline_pairs(objective, setting, silencer, rates)
        body = f"(\n{_indent(body)}\n)\nunless\n(\n{_indent(page)}\n)"
    return f'label_replace(\n{_indent(body)},\n  "slo", "{objective.name}", "", ""\n)'


def inline_burn_expr(
    severity: str,
    objectives: Sequence[tuple[Objective, Callable[[str], str]]],
    rates: Sequence[BurnRate] = BURN_RATES,
) -> str:
    """burn_expr(severity) with the SLO records inlined, for a rule that runs without the rule
    file (Grafana-managed): one instant query over the raw counters at every window of the
    pairs (up to 3d, valid in any instant query). `objectives` are the enabled ones, each with
    its settings' `setting(key)`; a disabled objective has no records, so it is left out here
    too. Each objective's series get its `slo` label (label_replace: the records carry it as a
    static label) before the objectives are joined, so two objectives of one target stay two
    series; per objective the pairs keep burn_expr's order, so the value is the same long
    window's burn rate. A severity in SILENCED_BY leaves out the series (same objective, same
    labels: same scope) where the silencing severity's condition holds: Grafana has no
    inhibition."""
    return BURN_JOIN.join(
        inline_burn_part(severity, objective, setting, rates) for objective, setting in objectives
    )
