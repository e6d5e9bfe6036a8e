"""plot.png: one bar per measured candidate, failed ones as red rows, no speculation's figure
as a dashed line."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib  # only a report draws: the other tune commands never load it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["ranked"][::-1]  # barh draws upwards: best at the top, failed at the bottom
    failed = report["failed"]
    labels = [f"{r['id']} (failed)" for r in failed] + [r["id"] for r in rows]
    values = [0.0] * len(failed) + [r["tok_s"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 1.4 + 0.45 * max(len(labels), 1)))
    colors = ["#d62728"] * len(failed) + [
        "#7f7f7f" if not r["speculative"]
        else "#1f77b4" if (r.get("speedup") or 0) > 1 else "#ff7f0e" for r in rows]
    bars = ax.barh(labels, values, color=colors)
    for bar in bars[: len(failed)]:
        ax.text(0, bar.get_y() + bar.get_height() / 2, " failed: skipped, rolled back",
                va="center", fontsize=9, color="#d62728")
    for bar, row in zip(bars[len(failed):], rows, strict=True):
        text = " no speculation" if not row["speculative"] else (
            f" {row['speedup']:.2f}x" if row.get("speedup") is not None else "")
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, text, va="center",
                fontsize=9)
    if report["no_spec_tok_s"] is not None:
        ax.axvline(report["no_spec_tok_s"], color="grey", linestyle="--",
                   label=f"no speculation {report['no_spec_tok_s']:.1f} tok/s (this sweep)")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False)
    unit = "weighted over the traffic mix" if report["traffic_mix"] else (
        f"at concurrency {report['concurrency']}")
    ax.set_xlabel(f"server gen throughput {unit} (tok/s)")
    title = f"Tuning candidates: {report['host']}"
    if report["standin"]:
        title += " (CPU stand-in, not SGLang)"
    ax.set_title(title)
    ax.set_xlim(0, max([*values, report["no_spec_tok_s"] or 0, 1.0]) * 1.2)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
