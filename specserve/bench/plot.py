"""plot.png: throughput against concurrency, this run against its baseline.

Left: aggregate tok/s (what the server delivers). Right: per-request tok/s p50 (what one user
sees), where speculative decoding's gain shows most and shrinks as the batch grows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

# Files only, no display: the benchmark runs on headless hosts and in CI.
matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from specserve.bench.report import speculative_summary

THIS_COLOUR = "#1f77b4"
BASELINE_COLOUR = "#7f7f7f"


def _series(result: dict[str, Any], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for level in result["levels"]:
        value = level["agg_tok_s"] if key == "agg" else level["request_tok_s"]["p50"]
        if value is not None:
            xs.append(level["concurrency"])
            ys.append(value)
    return xs, ys


def _panel(
    ax: Axes,
    result: dict[str, Any],
    baseline: dict[str, Any] | None,
    key: str,
    title: str,
) -> None:
    levels = sorted({lv["concurrency"] for lv in result["levels"]})
    heights = [1.0]
    if baseline is not None:
        bx, by = _series(baseline, key)
        ax.plot(
            bx,
            by,
            "s--",
            color=BASELINE_COLOUR,
            linewidth=2,
            markersize=7,
            label=f"{baseline['label']} ({speculative_summary(baseline['server'])})",
        )
        levels = sorted(set(levels) | set(bx))
        heights += by
    xs, ys = _series(result, key)
    heights += ys
    ax.plot(
        xs,
        ys,
        "o-",
        color=THIS_COLOUR,
        linewidth=2.5,
        markersize=8,
        label=f"{result['label']} ({speculative_summary(result['server'])})",
    )
    if baseline is not None and key == "agg":
        base = dict(zip(*_series(baseline, key), strict=True))
        for x, y in zip(xs, ys, strict=True):
            if base.get(x):
                ax.annotate(
                    f"{y / base[x]:.2f}x",
                    (x, y),
                    textcoords="offset points",
                    xytext=(0, 10),
                    ha="center",
                    fontsize=10,
                    color=THIS_COLOUR,
                    fontweight="bold",
                )
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent requests", fontsize=11)
    ax.set_ylabel("output tokens/s", fontsize=11)
    ax.set_title(title, fontsize=12)
    # Headroom for the speedup labels above the highest point.
    ax.set_ylim(0, max(heights) * 1.18)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.08)


def _short(name: str, limit: int = 48) -> str:
    """Model names are often paths; keep the informative tail so the title fits."""
    return name if len(name) <= limit else "..." + name[-(limit - 3) :]


def plot(result: dict[str, Any], baseline: dict[str, Any] | None, path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained")
    try:
        _panel(
            left,
            result,
            baseline,
            "agg",
            "Aggregate throughput (all requests)"
            + ("; labels: speedup vs baseline" if baseline is not None else ""),
        )
        _panel(right, result, baseline, "request", "Per-request decode speed (p50)")
        handles, labels = left.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=10, frameon=False)
        fig.suptitle(
            f"specserve bench: {_short(result['server']['model'])}, "
            f"{result['settings']['max_tokens']} output tokens/request"
            + ("  [stand-in server, simulated]" if result["server"].get("standin") else ""),
            fontsize=13,
        )
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
