"""Render the main Grafana dashboard panels to a PNG from a live Prometheus (docs/alerting.md).

Grafana cannot run here, so this draws the dashboard's own panels (same titles, same PromQL,
same legends, same threshold lines, from specserve.monitoring.dashboard built with the test's
window overrides) with matplotlib from /api/v1/query_range results, plus the ALERTS series
Prometheus keeps for its alerting rules and the times the webhook received each notification.
The end-to-end test calls it with the phase boundaries of its run; nothing here is synthetic.

Refresh the committed image: `SPECSERVE_WRITE_DASHBOARD_IMAGE=1 .venv/bin/pytest tests/e2e`
(writes docs/images/dashboard.png; without the variable the test renders to a temp dir only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from specserve.monitoring.dashboard import iter_panels
from tests.e2e.prom import Prometheus
from tests.e2e.webhook import Delivered
from tests.monitoring.expressions import executable

PANELS: tuple[str, ...] = (
    "Decode throughput vs baseline per concurrency bucket",
    "Speedup over baseline",
    "Accept length",
    "Decode throughput, last window",
    "Draft acceptance",
)
PHASE_COLOURS = ("#e8f5e9", "#fff3e0", "#ffebee", "#e3f2fd")
_LEGEND_VAR = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True)
class Phase:
    name: str
    start: float
    end: float


@dataclass(frozen=True)
class Series:
    label: str
    times: list[datetime]
    values: list[float]


def _legend(template: str, labels: dict[str, str]) -> str:
    # One server in the picture: its instance address would only make every legend longer.
    text = _LEGEND_VAR.sub(lambda m: "" if m.group(1) == "instance" else labels.get(m.group(1), ""),
                           template)  # fmt: skip
    return " ".join(text.split())


def panel_series(
    prom: Prometheus, panel: dict[str, Any], start: float, end: float, step: float
) -> list[Series]:
    series: list[Series] = []
    scale = 100.0 if _unit_label(panel) == "%" else 1.0
    for target in panel["targets"]:
        for item in prom.query_range(executable(target["expr"]), start, end, step):
            points = [(float(t), float(v)) for t, v in item["values"]]
            series.append(
                Series(
                    _legend(target.get("legendFormat", ""), item["metric"]),
                    [datetime.fromtimestamp(t) for t, _ in points],
                    [v * scale for _, v in points],
                )
            )
    return series


def alert_series(prom: Prometheus, start: float, end: float, step: float) -> list[Series]:
    found = prom.query_range('ALERTS{alertstate="firing"}', start, end, step)
    return [
        Series(item["metric"]["alertname"],
               [datetime.fromtimestamp(float(t)) for t, _ in item["values"]],
               [1.0 for _ in item["values"]])
        for item in found
    ]  # fmt: skip


def _draw_alerts(
    ax: Any, series: list[Series], delivered: Sequence[Delivered], step: float
) -> None:
    """One row per alert name, a bar over every run of consecutive firing samples, and a marker
    where the webhook received the firing (triangle) or resolved (circle) notification."""
    names = sorted({s.label for s in series} | {d.name for d in delivered})
    for s in series:
        row = names.index(s.label)
        runs: list[tuple[datetime, datetime]] = []
        for moment in s.times:
            if runs and (moment - runs[-1][1]).total_seconds() <= step * 1.5:
                runs[-1] = (runs[-1][0], moment)
            else:
                runs.append((moment, moment))
        for begin, finish in runs:
            ax.barh(row, finish - begin + timedelta(seconds=step), left=begin, height=0.5,
                    color="#c62828")  # fmt: skip
    for status, marker, colour in (("firing", "v", "black"), ("resolved", "o", "#2e7d32")):
        hits = [d for d in delivered if d.status == status]
        ax.scatter([datetime.fromtimestamp(d.received_at) for d in hits],
                   [names.index(d.name) + 0.4 for d in hits], marker=marker, color=colour,
                   s=40, zorder=3, label=f"webhook received {status}")  # fmt: skip
    ax.set_yticks(range(len(names)), names, fontsize=9)
    ax.set_ylim(-0.7, max(len(names), 1) - 0.1)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("Firing alerts (Prometheus ALERTS) and webhook deliveries", fontsize=11,
                 loc="left")  # fmt: skip


def _threshold_lines(ax: Any, panel: dict[str, Any], scale: float) -> None:
    """The panel's own threshold steps (the alert thresholds), as Grafana draws them."""
    thresholds = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {})
    for step in thresholds.get("steps", []):
        if step.get("value") is not None:
            ax.axhline(step["value"] * scale, color=step["color"], linewidth=1.4,
                       linestyle="--", label=f"alert threshold {step['value']:g}")  # fmt: skip


def _unit_label(panel: dict[str, Any]) -> str:
    unit = str(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""))
    if unit == "percentunit":
        return "%"
    return unit.removeprefix("suffix: ").strip()


def render_dashboard_image(
    prom: Prometheus,
    phases: Sequence[Phase],
    out: Path,
    dashboard: dict[str, Any],
    window: str,
    delivered: Sequence[Delivered] = (),
    step: float = 1.0,
) -> None:
    # Imported here: matplotlib is a test/docs dependency, not the package's.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    start, end = phases[0].start - 5, phases[-1].end + 2
    panels = {p["title"]: p for p in iter_panels(dashboard) if p["type"] != "row"}
    fig, axes = plt.subplots(3, 2, figsize=(15, 11), sharex=True)
    flat = list(axes.flat)
    for ax, title in zip(flat, PANELS, strict=False):
        panel = panels[title]
        for s in panel_series(prom, panel, start, end, step):
            style = "--" if s.label.startswith("baseline") else "-"
            ax.plot(s.times, s.values, style, label=s.label, linewidth=1.6)
        _threshold_lines(ax, panel, 100.0 if _unit_label(panel) == "%" else 1.0)
        ax.set_title(title, fontsize=11, loc="left")
        ax.set_ylabel(_unit_label(panel))
        ax.legend(fontsize=8, loc="best")
    _draw_alerts(flat[len(PANELS)], alert_series(prom, start, end, step), delivered, step)
    for axis in flat:
        for index, phase in enumerate(phases):
            axis.axvspan(datetime.fromtimestamp(phase.start), datetime.fromtimestamp(phase.end),
                         color=PHASE_COLOURS[index % len(PHASE_COLOURS)], zorder=0)  # fmt: skip
        axis.grid(True, alpha=0.3)
        axis.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    handles = [
        Patch(color=PHASE_COLOURS[index % len(PHASE_COLOURS)],
              label=f"{phase.name} ({phase.end - phase.start:.0f} s)")
        for index, phase in enumerate(phases)
    ]  # fmt: skip
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=10,
               bbox_to_anchor=(0.5, 0.945), frameon=False)  # fmt: skip
    fig.suptitle(
        "specserve dashboard, main panels: live Prometheus data of the end-to-end test\n"
        f"(CPU stand-in server under constant load, driven through four phases, not SGLang; "
        f"{window} windows and 2 s `for` as in the test's alert rules)",
        fontsize=12,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.925))
    fig.savefig(out, dpi=110)
    plt.close(fig)
