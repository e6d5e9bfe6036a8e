"""The monitoring reference tables of the docs, from the catalogues they document.

- docs/metrics.md: every metric the exporter serves (`specserve_exporter.names`), its type, its
  labels with their fixed value sets (the exporter's own enums and fields) and its help text, the
  same text Prometheus shows;
- docs/alerts.md: every alert of `specserve.monitoring.rules.ALERTS`, its severity, window,
  `for`, meaning, thresholds with their defaults, and runbook.

`specserve generate` writes them between their markers (specserve/docblocks.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specserve.docblocks import Block, ReadSource, code, table
from specserve.monitoring import rules, slo
from specserve_exporter import config, fields, names, parser
from specserve_exporter.sources import base as sources

# A label's fixed value set, where the exporter bounds it by an enum or a field table; the
# `reason` of a source error is not the `reason` of a rejected line.
_REASONS: dict[str, tuple[str, ...]] = {
    names.LOG_LINES_REJECTED.name: tuple(parser.Reason),
    names.SOURCE_ERRORS.name: tuple(sources.ErrorReason),
}


def _label_values(metric: names.Metric, label: str) -> Sequence[str]:
    if label == names.REASON:
        return _REASONS[metric.name]
    if label == names.KIND:
        return tuple(fields.Kind)
    if label == names.SOURCE:
        return config.SOURCES
    if label in (names.POOL, names.GRAPH):
        return tuple(feed.field.label for feed in _feeds(metric))
    return ()


def _feeds(metric: names.Metric) -> list[fields.Feed]:
    return [f for kind in fields.LINE_KINDS.values() for f in kind.feeds if f.metric == metric]


def _labels(metric: names.Metric) -> str:
    plain = [label for label in metric.labels if not _label_values(metric, label)]
    valued = [f"{code(label)} = {', '.join(_label_values(metric, label))}"
              for label in metric.labels if _label_values(metric, label)]  # fmt: skip
    return "; ".join(filter(None, [", ".join(plain), *valued]))


def _meaning(metric: names.Metric) -> str:
    bounds = sorted({b for feed in _feeds(metric) for b in feed.bounds})
    if not bounds:
        return metric.help
    return f"{metric.help} Buckets: {', '.join(f'{b:g}' for b in bounds)}."


def metrics_table(_root: Path, _read: ReadSource) -> str:
    return table(
        ("name", "type", "labels", "meaning"),
        ((code(m.sample), m.type.value, _labels(m), _meaning(m)) for m in names.ALL),
    )


def _default(value: float | str) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return code(value) if value else "empty"


def _thresholds(alert: rules.Alert) -> str:
    if not alert.thresholds:
        return "none"
    return " ".join(f"{code(t.name)} ({_default(t.default)}): {t.help.rstrip('.')}."
                    for t in alert.thresholds)  # fmt: skip


def alerts_table(_root: Path, _read: ReadSource) -> str:
    return table(
        ("Alert", "Severity", "Window", "For", "Meaning", "Thresholds (default)", "Runbook"),
        (
            (code(a.name), a.severity if a.enabled_by_default else f"{a.severity} (opt-in: off "
             "unless an override enables it)", a.window or "none", a.for_, a.meaning,
             _thresholds(a),
             f"[runbook](runbooks/{a.runbook_slug}.md)")
            for a in rules.ALERTS
        ),
    )


def slo_table(_root: Path, _read: ReadSource) -> str:
    return table(
        ("Objective", "Good events", "Target (default)", "Period (default)",
         "threshold_seconds (default; allowed)"),
        (
            (code(o.name), o.help, f"{o.target:g}", o.period,
             "none" if o.threshold_seconds is None
             else f"{o.threshold_seconds:g}; {', '.join(f'{b:g}' for b in o.buckets)}")
            for o in slo.OBJECTIVES
        ),
    )  # fmt: skip


def burn_rate_table(_root: Path, _read: ReadSource) -> str:
    alert = {True: "SpecServeErrorBudgetBurn", False: "SpecServeErrorBudgetBurnSlow"}
    return table(
        ("Alert", "Severity", "Long window", "Short window", "Burn rate above",
         "Budget spent when it fires (28d period)"),
        (
            (code(alert[r.severity == "critical"]), r.severity, r.long, r.short, f"{r.factor:g}x",
             f"{r.factor * _days(r.long) / 28:.1%} in {r.long}")
            for r in slo.BURN_RATES
        ),
    )  # fmt: skip


def _days(window: str) -> float:
    number, unit = float(window[:-1]), window[-1]
    return number * {"m": 1 / 1440, "h": 1 / 24, "d": 1.0}[unit]


BLOCKS: tuple[Block, ...] = (
    Block("docs/metrics.md", "metrics", "exporter/specserve_exporter/names.py", metrics_table),
    Block("docs/alerts.md", "alerts", "specserve/monitoring/rules.py", alerts_table),
    Block("docs/slo.md", "objectives", "specserve/monitoring/slo.py", slo_table),
    Block("docs/slo.md", "burn-rates", "specserve/monitoring/slo.py", burn_rate_table),
)
