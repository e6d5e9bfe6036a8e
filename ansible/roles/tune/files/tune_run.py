"""A tuning run's state file and report, on the controller (run by playbooks/tune.yml).

    tune_run.py init RUN_DIR --points JSON --settings JSON   -> {"pending": [...], ...}
    tune_run.py mark RUN_DIR POINT_ID ok|failed [--reason TEXT]
    tune_run.py report RUN_DIR --concurrency C --baseline JSON [--current ID] [--host H]
                       [--mix JSON]

state.json records every candidate and how it ended, written atomically after each one, so a run
killed at any moment resumes with the candidates it had not finished. The candidates are no
speculation (the profile without its drafter) and the speculative points, all with the same
max_running_requests. The report ranks the measured ones by the server's decode-log gen throughput
in the concurrency bucket as the exporter saw it (the quantity a baseline holds), at one
concurrency or weighted over a traffic mix, shows p99 TTFT / ITL beside it, which configuration
wins at each benched concurrency and where speculation stops paying (the crossover).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specserve.buckets import concurrency_bucket

FINISHED = ("ok", "failed", "invalid")


class TuneError(Exception):
    """A run directory or argument that cannot be used; the message says how to fix it."""


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)  # a kill leaves the old or the new file, never half of one


def load_state(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "state.json"
    try:
        state: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TuneError(f"{path} does not exist: run `init` first") from None
    except json.JSONDecodeError as exc:
        raise TuneError(f"{path} is not valid JSON ({exc}); remove the run directory") from None
    return state


def init(run_dir: Path, points: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """Create or resume the run: finished points keep their outcome, the rest are pending."""
    check_settings(settings)
    path = run_dir / "state.json"
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if path.exists():
        state = load_state(run_dir)
        if state.get("settings") != settings:
            raise TuneError(
                f"{run_dir} holds a tuning run with other settings ({state.get('settings')}); "
                "resume it with the same variables, or start a new one with another tune_run_id"
            )
        state["resumed_at"] = [*state.get("resumed_at", []), now]
    else:
        state = {"settings": settings, "started_at": now, "points": {}}
    known: dict[str, Any] = state["points"]
    for point in points:
        entry = known.get(point["id"])
        if entry is None or entry["status"] not in FINISHED:
            status = "pending" if point["valid"] else "invalid"
            known[point["id"]] = {**point, "status": status, "reason": point.get("reason", "")}
    state["order"] = [p["id"] for p in points]
    _write_json(path, state)
    return summary(state)


def summary(state: dict[str, Any]) -> dict[str, Any]:
    by_status: dict[str, list[str]] = {"pending": [], "ok": [], "failed": [], "invalid": []}
    for ident in state["order"]:
        by_status[state["points"][ident]["status"]].append(ident)
    return by_status


def mark(run_dir: Path, ident: str, status: str, reason: str = "") -> dict[str, Any]:
    state = load_state(run_dir)
    if ident not in state["points"]:
        raise TuneError(f"no point {ident!r} in {run_dir}/state.json")
    state["points"][ident].update(
        status=status,
        reason=reason,
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _write_json(run_dir / "state.json", state)
    return summary(state)


def _level(result: dict[str, Any], concurrency: int) -> dict[str, Any] | None:
    return next((lv for lv in result["levels"] if lv["concurrency"] == concurrency), None)


def _p99(level: dict[str, Any], key: str) -> float | None:
    value = (level.get(key) or {}).get("p99")
    return float(value) if isinstance(value, int | float) else None


def measure(run_dir: Path, ident: str, concurrency: int) -> dict[str, Any]:
    """The point's numbers at `concurrency` from its `specserve bench` results.json."""
    path = run_dir / "points" / ident / "results.json"
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return {"server_gen_tok_s": None, "note": f"no benchmark result ({exc})"}
    level = _level(result, concurrency)
    if level is None:
        return {"server_gen_tok_s": None, "note": f"not benchmarked at concurrency {concurrency}"}
    exporter = level.get("exporter") or {}
    server = (exporter.get("gen_throughput_tok_s") or {}).get(concurrency_bucket(concurrency))
    return {
        "server_gen_tok_s": server,
        "agg_tok_s": level.get("agg_tok_s"),
        "accept_length": exporter.get("accept_length"),
        # The client's view of what speculation costs in latency (specserve bench's stats).
        "ttft_p99_s": _p99(level, "ttft_s"),
        "itl_p99_s": _p99(level, "itl_s"),
        "standin": bool(result["server"].get("standin")),
        "note": "" if server is not None else (
            level.get("exporter_error") or "the exporter saw no decode line in this bucket"),
    }


# Weights are user-typed decimals: 0.5 + 0.3 + 0.2 is not exactly 1.0 in binary.
MIX_TOLERANCE = 0.01


def parse_mix(mix: Any, benched: list[int]) -> dict[int, float]:
    """tune_traffic_mix as {concurrency: weight}; {} or None means no mix (one concurrency)."""
    if not mix:
        return {}
    if not isinstance(mix, dict):
        raise TuneError(f"tune_traffic_mix must map concurrency to weight, e.g. "
                        f"{{1: 0.5, 8: 0.3, 32: 0.2}}; got {mix!r}")
    parsed: dict[int, float] = {}
    for key, weight in mix.items():
        try:
            level = int(str(key))
        except ValueError:
            raise TuneError(f"tune_traffic_mix key {key!r} is not a concurrency (an integer), "
                            "e.g. {1: 0.5, 8: 0.3, 32: 0.2}") from None
        if level not in benched:
            raise TuneError(f"tune_traffic_mix names concurrency {level}, which is not benched "
                            f"(tune_bench_concurrency is {benched}); add {level} to "
                            "tune_bench_concurrency or drop it from the mix")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise TuneError(f"tune_traffic_mix weight for concurrency {level} is {weight!r}: "
                            "every weight must be a number above 0 (drop a level to weigh it 0)")
        parsed[level] = float(weight)
    total = sum(parsed.values())
    if abs(total - 1.0) > MIX_TOLERANCE:
        raise TuneError(f"tune_traffic_mix weights sum to {total:g}, not 1 (within "
                        f"{MIX_TOLERANCE:g}): give each concurrency its share of the traffic, "
                        "e.g. {1: 0.5, 8: 0.3, 32: 0.2}")
    return dict(sorted(parsed.items()))


def check_settings(settings: dict[str, Any]) -> None:
    """The ranking must be computable from what the sweep benches: refuse before any restart."""
    benched = [int(c) for c in settings.get("bench_concurrency") or []]
    mix = parse_mix(settings.get("traffic_mix"), benched)
    concurrency = settings.get("concurrency")
    if not mix and concurrency is not None and int(concurrency) not in benched:
        raise TuneError(f"tune_concurrency {concurrency} is not benched (tune_bench_concurrency "
                        f"is {benched}); add it to tune_bench_concurrency")


def _params(point: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {"speculative": point.get("speculative", True),
                              "max_running_requests": point.get("max_running_requests")}
    if params["speculative"] and "drafter" in point:  # another method: its drafter block
        params["drafter"] = point["drafter"]
    elif params["speculative"]:
        params.update({k: point[k] for k in ("num_steps", "eagle_topk", "num_draft_tokens")})
        for key in ("nccl_preset", "adaptive"):
            if point.get(key):
                params[key] = point[key]
    return params


def _figure(levels: dict[int, dict[str, Any]], concurrency: int,
            mix: dict[int, float]) -> float | None:
    """Tok/s at `concurrency`, or the mix's weighted mean over its levels; None if one is
    missing."""
    if not mix:
        return levels[concurrency].get("server_gen_tok_s")
    values = [levels[c].get("server_gen_tok_s") for c in mix]
    if any(v is None for v in values):
        return None
    return round(sum(w * v for w, v in zip(mix.values(), values, strict=True)), 2)


def _worst(levels: dict[int, dict[str, Any]], keys: list[int], name: str) -> float | None:
    values = [levels[c][name] for c in keys if levels[c].get(name) is not None]
    return max(values) if values else None


def per_concurrency(rows: list[dict[str, Any]], benched: list[int]) -> list[dict[str, Any]]:
    """At each benched concurrency: the fastest configuration, and whether speculation pays."""
    table = []
    for c in benched:
        measured = [(r, r["levels"][c]["server_gen_tok_s"]) for r in rows
                    if r["levels"][c].get("server_gen_tok_s") is not None]
        if not measured:
            continue
        winner, tok_s = max(measured, key=lambda item: item[1])
        spec = [item for item in measured if item[0]["speculative"]]
        plain = [item for item in measured if not item[0]["speculative"]]
        best_spec = max(spec, key=lambda item: item[1]) if spec else None
        no_spec = plain[0][1] if plain else None
        table.append({
            "concurrency": c,
            "winner": winner["id"],
            "winner_tok_s": tok_s,
            "no_spec_tok_s": no_spec,
            "best_speculative": best_spec[0]["id"] if best_spec else None,
            "best_speculative_tok_s": best_spec[1] if best_spec else None,
            "speculation_pays": (None if best_spec is None or no_spec is None
                                 else best_spec[1] > no_spec),
        })
    return table


def crossover(table: list[dict[str, Any]]) -> dict[str, Any]:
    """The lowest benched concurrency from which no speculation wins at it and at every higher
    level: where speculation stops paying."""
    known = [row for row in table if row["speculation_pays"] is not None]
    if not known:
        return {"concurrency": None, "text": "unknown: speculation and no speculation were not "
                "both measured at any concurrency"}
    levels = [row["concurrency"] for row in known]
    pays = [row["speculation_pays"] for row in known]
    if all(pays):
        return {"concurrency": None,
                "text": f"none up to {levels[-1]}: speculation pays at every benched concurrency "
                        f"({', '.join(map(str, levels))})"}
    if not any(pays):
        return {"concurrency": levels[0],
                "text": f"speculation pays at no benched concurrency "
                        f"({', '.join(map(str, levels))})"}
    position = len(pays)
    while position > 0 and not pays[position - 1]:
        position -= 1
    if position == len(pays):
        return {"concurrency": None,
                "text": f"none up to {levels[-1]}: speculation pays at the highest benched "
                        f"concurrency ({levels[-1]}), though not at every lower one"}
    return {"concurrency": levels[position],
            "text": f"{levels[position]}: speculation pays up to concurrency "
                    f"{levels[position - 1]} and stops paying from {levels[position]}"}


def _where(concurrency: int, mix: dict[int, float]) -> str:
    if mix:
        return "over the traffic mix " + ", ".join(f"{c}: {w:g}" for c, w in mix.items())
    return f"at concurrency {concurrency}"


def verdict(best: dict[str, Any] | None, ranked: list[dict[str, Any]], where: str) -> str:
    """One sentence with the two figures: the winner and the best of the other kind."""
    if best is None:
        return "No configuration was measured: nothing to apply."
    spec = next((r for r in ranked if r["speculative"]), None)
    plain = next((r for r in ranked if not r["speculative"]), None)
    if not best["speculative"]:
        if spec is None:
            return (f"No speculation is the only configuration measured {where} "
                    f"({best['tok_s']:.1f} tok/s): no speculative point was measured.")
        return (f"No speculation is fastest {where}: {best['tok_s']:.1f} tok/s against "
                f"{spec['tok_s']:.1f} tok/s for the best speculative point {spec['id']}, "
                "so speculation does not pay here.")
    if plain is None:
        return (f"{best['id']} is the fastest speculative point {where} at "
                f"{best['tok_s']:.1f} tok/s; no speculation was not measured, so whether "
                "speculation pays is unknown.")
    return (f"Speculation pays {where}: {best['id']} at {best['tok_s']:.1f} tok/s against "
            f"{plain['tok_s']:.1f} tok/s without speculation "
            f"({best['tok_s'] / plain['tok_s']:.2f}x).")


def rank(
    state: dict[str, Any], run_dir: Path, concurrency: int, baseline: dict[str, float],
    mix: dict[int, float] | None = None,
) -> dict[str, Any]:
    """Every measured configuration, no speculation included, ranked by measured throughput at
    `concurrency` or weighted over `mix`; speedups are against no speculation measured in the
    same sweep."""
    mix = mix or {}
    settings = state.get("settings", {})
    benched = sorted({int(c) for c in settings.get("bench_concurrency") or []}
                     | set(mix) | ({concurrency} if not mix else set()))
    ranked_at = list(mix) if mix else [concurrency]
    measured, unmeasured, failed, invalid = [], [], [], []
    for ident in state["order"]:
        point = state["points"][ident]
        row: dict[str, Any] = {"id": ident, **_params(point)}
        if point["status"] == "ok":
            levels = {c: measure(run_dir, ident, c) for c in benched}
            row["levels"] = levels
            if not mix:  # one concurrency: its own numbers beside the ranking figure
                here = levels[concurrency]
                row.update({k: here.get(k)
                            for k in ("server_gen_tok_s", "agg_tok_s", "accept_length")})
            row["tok_s"] = _figure(levels, concurrency, mix)
            row["ttft_p99_s"] = _worst(levels, ranked_at, "ttft_p99_s")
            row["itl_p99_s"] = _worst(levels, ranked_at, "itl_p99_s")
            row["standin"] = any(lv.get("standin") for lv in levels.values())
            if row["tok_s"] is not None:
                measured.append(row)
            else:
                row["note"] = "; ".join(sorted({lv["note"] for lv in levels.values()
                                                if lv.get("note")}))
                unmeasured.append(row)
        elif point["status"] == "failed":
            failed.append({**row, "reason": point["reason"]})
        elif point["status"] == "invalid":
            invalid.append({**row, "reason": point["reason"]})
    # Ties keep candidate order (stable sort): no speculation first, then the cheaper points.
    measured.sort(key=lambda r: -r["tok_s"])
    plain = next((r for r in measured if not r["speculative"]), None)
    for position, row in enumerate(measured, start=1):
        row["rank"] = position
        row["speedup"] = round(row["tok_s"] / plain["tok_s"], 4) if plain else None
    bucket = concurrency_bucket(concurrency)
    table = per_concurrency(measured, benched)
    best = measured[0] if measured else None
    where = _where(concurrency, mix)
    return {
        "concurrency": concurrency,
        "bucket": bucket,
        "traffic_mix": {str(c): w for c, w in mix.items()},
        "where": where,
        "baseline_tok_s": baseline.get(bucket),
        "no_spec_tok_s": plain["tok_s"] if plain else None,
        "metric": "server decode-log gen throughput (tok/s) in the concurrency bucket, as the "
                  "exporter saw it" + ("; weighted mean over the traffic mix" if mix else "")
                  + "; speedup = that / no speculation measured in this sweep",
        "ranked": measured,
        "unmeasured": unmeasured,
        "failed": failed,
        "invalid": invalid,
        "pending": [i for i in state["order"] if state["points"][i]["status"] == "pending"],
        "best": best,
        "verdict": verdict(best, measured, where),
        "per_concurrency": table,
        "crossover": crossover(table),
        "standin": any(r.get("standin") for r in measured + unmeasured),
    }


def _fmt(value: Any, spec: str = ".1f", scale: float = 1.0) -> str:
    if value is None:
        return "-"
    return format(value * scale if scale != 1.0 else value, spec)


def _tree(row: dict[str, Any]) -> tuple[str, str, str]:
    if not row["speculative"]:
        return ("-", "-", "-")
    return tuple(_fmt(row.get(k), "d") if isinstance(row.get(k), int) else "-"  # type: ignore[return-value]
                 for k in ("num_steps", "eagle_topk", "num_draft_tokens"))


def _label(row: dict[str, Any]) -> str:
    if not row["speculative"]:
        return f"`{row['id']}` (no speculation)"
    drafter = row.get("drafter")
    if isinstance(drafter, dict):
        return f"`{row['id']}` ({str(drafter.get('algorithm', '?')).upper()})"
    return f"`{row['id']}`" + (" (adaptive)" if row.get("adaptive") else "")


def markdown(report: dict[str, Any]) -> str:
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
    lines += ["", f"**{report['verdict']}**"]
    if report["per_concurrency"]:
        lines += ["", "## Per concurrency", "",
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
        lines += ["", f"Crossover (where speculation stops paying): {report['crossover']['text']}."]
    for title, key in (("Failed (skipped; the last good server was restored)", "failed"),
                       ("Invalid (refused by the `specserve check` rules, not run)", "invalid"),
                       ("Measured without a server number", "unmeasured")):
        if report[key]:
            lines += ["", f"## {title}", "", "| configuration | why |", "| --- | --- |"]
            for r in report[key]:
                why = (r.get("reason") or r.get("note", "")).replace("|", "/")
                lines.append(f"| `{r['id']}` | {why} |")
    if report["pending"]:
        lines += ["", f"Not run yet: {', '.join(report['pending'])} (re-run to resume)."]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

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


def report(run_dir: Path, concurrency: int, baseline: dict[str, float], current: str,
           host: str, mix: Any = None) -> dict[str, Any]:
    state = load_state(run_dir)
    benched = [int(c) for c in state["settings"].get("bench_concurrency") or [concurrency]]
    result = rank(state, run_dir, concurrency, {str(k): float(v) for k, v in baseline.items()},
                  parse_mix(mix, benched))
    result.update(
        host=host,
        profile=state["settings"].get("profile", ""),
        run_dir=str(run_dir),
        current=current,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _write_json(run_dir / "report.json", result)
    (run_dir / "report.md").write_text(markdown(result), encoding="utf-8")
    plot(result, run_dir / "plot.png")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tune_run.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_init = sub.add_parser("init")
    p_init.add_argument("run_dir", type=Path)
    p_init.add_argument("--points", required=True, type=json.loads)
    p_init.add_argument("--settings", required=True, type=json.loads)
    p_mark = sub.add_parser("mark")
    p_mark.add_argument("run_dir", type=Path)
    p_mark.add_argument("point")
    p_mark.add_argument("status", choices=("ok", "failed"))
    p_mark.add_argument("--reason", default="")
    p_report = sub.add_parser("report")
    p_report.add_argument("run_dir", type=Path)
    p_report.add_argument("--concurrency", type=int, required=True)
    p_report.add_argument("--baseline", type=json.loads, required=True)
    p_report.add_argument("--current", default="")
    p_report.add_argument("--host", default="")
    p_report.add_argument("--mix", type=json.loads, default=None)
    args = parser.parse_args(argv)
    try:
        if args.command == "init":
            out = init(args.run_dir, args.points, args.settings)
        elif args.command == "mark":
            out = mark(args.run_dir, args.point, args.status, args.reason)
        else:
            out = report(args.run_dir, args.concurrency, args.baseline, args.current, args.host,
                         args.mix)
    except TuneError as exc:
        print(f"tune_run.py: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
