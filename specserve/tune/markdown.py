"""report.md: the ranking table, the verdict, the per-concurrency table and crossover, and the
candidates that were not measured with why."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, spec: str = ".1f", scale: float = 1.0) -> str:
    if value is None:
        return "-"
    return format(value * scale if scale != 1.0 else value, spec)


def _tree(row: dict[str, Any]) -> tuple[str, str, str]:
    if not row["speculative"]:
        return ("-", "-", "-")
    steps, topk, draft = (_fmt(row.get(k), "d") if isinstance(row.get(k), int) else "-"
                          for k in ("num_steps", "eagle_topk", "num_draft_tokens"))
    return steps, topk, draft


def _label(row: dict[str, Any]) -> str:
    if not row["speculative"]:
        return f"`{row['id']}` (no speculation)"
    drafter = row.get("drafter")
    if isinstance(drafter, dict):
        return f"`{row['id']}` ({str(drafter.get('algorithm', '?')).upper()})"
    return f"`{row['id']}`" + (" (adaptive)" if row.get("adaptive") else "")


def _header(report: dict[str, Any]) -> list[str]:
    c, b = report["concurrency"], report["bucket"]
    mix = report["traffic_mix"]
    lines = [f"# Tuning report: {report['host']} ({report['profile']})", ""]
    if report["standin"]:
        lines += ["> Measured on the CPU **stand-in** (docs/standin.md), not SGLang: the numbers "
                  "come from its documented behaviour model.", ""]
    recorded = report["baseline_tok_s"]
    lines += [
        f"- run: `{report['run_dir']}`, {report['generated_at']}",
        f"- ranked {report['where']}" + ("" if mix else f" (bucket `{b}`)")
        + ", no speculation measured in this sweep as a candidate"
        + (f"; the profile's recorded baseline is {recorded:.1f} tok/s at bucket `{b}`"
           if recorded is not None else ""),
        f"- metric: {report['metric']}",
        "- p99 TTFT / ITL: the benchmark client's, "
        + ("the worst over the mix's levels" if mix else f"at concurrency {c}"),
        "",
    ]
    return lines


def _ranking(report: dict[str, Any]) -> list[str]:
    c, mix = report["concurrency"], report["traffic_mix"]
    lines = [
        f"| rank | configuration | steps | top-k | draft tokens | max running | "
        f"{'weighted' if mix else f'server gen @{c}'} tok/s | speedup vs no spec | accept len "
        "| p99 TTFT ms | p99 ITL ms | client agg tok/s |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["ranked"]:
        current = " (current)" if row["id"] == report.get("current") else ""
        steps, topk, draft = _tree(row)
        lines.append(
            f"| {row['rank']} | {_label(row)}{current} | {steps} | {topk} | {draft} "
            f"| {_fmt(row.get('max_running_requests'), 'd')} | {_fmt(row['tok_s'])} "
            f"| {_fmt(row.get('speedup'), '.2f')}x | {_fmt(row.get('accept_length'), '.2f')} "
            f"| {_fmt(row.get('ttft_p99_s'), '.1f', 1000)} "
            f"| {_fmt(row.get('itl_p99_s'), '.2f', 1000)} | {_fmt(row.get('agg_tok_s'))} |"
        )
    return [*lines, "", f"**{report['verdict']}**"]


def _per_concurrency(report: dict[str, Any]) -> list[str]:
    if not report["per_concurrency"]:
        return []
    lines = ["", "## Per concurrency", "",
             "| concurrency | fastest | tok/s | no speculation tok/s "
             "| best speculative | tok/s | speculation pays |",
             "| ---: | --- | ---: | ---: | --- | ---: | --- |"]
    for row in report["per_concurrency"]:
        pays = {True: "yes", False: "no", None: "-"}[row["speculation_pays"]]
        spec = f"`{row['best_speculative']}`" if row["best_speculative"] else "-"
        lines.append(
            f"| {row['concurrency']} | `{row['winner']}` | {_fmt(row['winner_tok_s'])} "
            f"| {_fmt(row['no_spec_tok_s'])} | {spec} "
            f"| {_fmt(row['best_speculative_tok_s'])} | {pays} |")
    crossing = report["crossover"]["text"]
    return [*lines, "", f"Crossover (where speculation stops paying): {crossing}."]


def _not_ranked(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for title, key in (("Refused (degenerate outputs: measured, not ranked)", "refused"),
                       ("Failed (skipped; the last good server was restored)", "failed"),
                       ("Invalid (refused by the `specserve check` rules, not run)", "invalid"),
                       ("Measured without a server number", "unmeasured")):
        if report.get(key):
            lines += ["", f"## {title}", "", "| configuration | why |", "| --- | --- |"]
            for r in report[key]:
                why = (r.get("reason") or r.get("note", "")).replace("|", "/")
                lines.append(f"| `{r['id']}` | {why} |")
    if report["pending"]:
        lines += ["", f"Not run yet: {', '.join(report['pending'])} (re-run to resume)."]
    return lines


def markdown(report: dict[str, Any]) -> str:
    """report.md for a ranked run (rank.rank's result with host, profile, run_dir, current and
    generated_at added)."""
    lines = _header(report) + _ranking(report) + _per_concurrency(report) + _not_ranked(report)
    return "\n".join(lines) + "\n"
