"""acceptance.png: per prompt class, the per-request accept length (p10-p90 and median) at each
concurrency, and how often each draft position survived a verify pass (all levels pooled)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: headless hosts and CI

import matplotlib.pyplot as plt

from specserve.bench.acceptance import add_histograms, survival


def has_acceptance(result: dict[str, Any]) -> bool:
    return any(level.get("acceptance") for level in result["levels"])


def plot_acceptance(result: dict[str, Any], path: Path) -> None:
    levels = [lv for lv in result["levels"] if lv.get("acceptance")]
    kinds = sorted({k for lv in levels for k in lv["acceptance"]["by_kind"]})
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), layout="constrained")
    try:
        width = 0.8 / max(1, len(kinds))
        for i, kind in enumerate(kinds):
            xs, mid, low, high = [], [], [], []
            for j, lv in enumerate(levels):
                part = lv["acceptance"]["by_kind"].get(kind)
                if part is None or part["accept_length"]["p50"] is None:
                    continue
                dist = part["accept_length"]
                xs.append(j + (i - (len(kinds) - 1) / 2) * width)
                mid.append(dist["p50"])
                low.append(dist["p50"] - dist["p10"])
                high.append(dist["p90"] - dist["p50"])
            left.errorbar(xs, mid, yerr=[low, high], fmt="o", capsize=4, label=kind)
            pooled = add_histograms(
                lv["acceptance"]["by_kind"][kind]["histogram"]
                for lv in levels
                if kind in lv["acceptance"]["by_kind"]
            )
            values = survival(pooled)
            right.plot(range(1, len(values) + 1), values, "o-", label=kind)
        left.set_xticks(range(len(levels)), [str(lv["concurrency"]) for lv in levels])
        left.set_xlabel("concurrent requests")
        left.set_ylabel("accept length per request (p10, p50, p90)")
        left.set_title("Accept length per request, by prompt class")
        right.set_xlabel("draft position k")
        right.set_ylabel("P(accepted drafts >= k)")
        right.set_ylim(0, 1.05)
        right.set_title("How often draft position k survives a verify pass")
        for ax in (left, right):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=9)
        fig.suptitle(
            f"specserve bench: {result['label']}"
            + ("  [stand-in server, simulated]" if result["server"].get("standin") else "")
        )
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
