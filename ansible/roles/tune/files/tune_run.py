"""A tuning run's state file and report, on the controller (run by playbooks/tune.yml).

    tune_run.py init RUN_DIR --points JSON --settings JSON   -> {"pending": [...], ...}
    tune_run.py mark RUN_DIR POINT_ID ok|failed [--reason TEXT]
    tune_run.py report RUN_DIR --concurrency C --baseline JSON [--current ID] [--host H]

state.json records every point and how it ended, written atomically after each point, so a run
killed at any moment resumes with the points it had not finished. The report ranks the measured
points by speedup over the profile's baseline at one concurrency, with the quantity the baseline
holds: the server's decode-log gen throughput in that concurrency bucket as the exporter saw it.
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


def measure(run_dir: Path, ident: str, concurrency: int) -> dict[str, Any]:
    """The point's numbers at `concurrency` from its `specserve bench` results.json."""
    path = run_dir / "points" / ident / "results.json"
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return {"note": f"no benchmark result ({exc})"}
    level = _level(result, concurrency)
    if level is None:
        return {"note": f"not benchmarked at concurrency {concurrency}"}
    exporter = level.get("exporter") or {}
    server = (exporter.get("gen_throughput_tok_s") or {}).get(concurrency_bucket(concurrency))
    return {
        "server_gen_tok_s": server,
        "agg_tok_s": level.get("agg_tok_s"),
        "accept_length": exporter.get("accept_length"),
        "standin": bool(result["server"].get("standin")),
        "note": "" if server is not None else (
            level.get("exporter_error") or "the exporter saw no decode line in this bucket"),
    }


def rank(
    state: dict[str, Any], run_dir: Path, concurrency: int, baseline: dict[str, float]
) -> dict[str, Any]:
    bucket = concurrency_bucket(concurrency)
    base = baseline.get(bucket)
    if base is None:
        raise TuneError(
            f"the profile's baseline has no value for bucket {bucket} (concurrency "
            f"{concurrency}); run playbooks/baseline.yml with {concurrency} among "
            "tune_baseline_concurrency"
        )
    measured, unmeasured, failed, invalid = [], [], [], []
    for ident in state["order"]:
        point = state["points"][ident]
        params = {k: point[k] for k in ("num_steps", "eagle_topk", "num_draft_tokens")}
        if point.get("nccl_preset"):
            params["nccl_preset"] = point["nccl_preset"]
        row: dict[str, Any] = {"id": ident, **params}
        if point["status"] == "ok":
            row.update(measure(run_dir, ident, concurrency))
            if row.get("server_gen_tok_s") is not None:
                row["speedup"] = round(row["server_gen_tok_s"] / base, 4)
                measured.append(row)
            else:
                unmeasured.append(row)
        elif point["status"] == "failed":
            failed.append({**row, "reason": point["reason"]})
        elif point["status"] == "invalid":
            invalid.append({**row, "reason": point["reason"]})
    # Ties keep grid order (stable sort): the earlier, usually cheaper, point first.
    measured.sort(key=lambda r: -r["speedup"])
    for position, row in enumerate(measured, start=1):
        row["rank"] = position
    pending = [i for i in state["order"] if state["points"][i]["status"] == "pending"]
    return {
        "concurrency": concurrency,
        "bucket": bucket,
        "baseline_tok_s": base,
        "metric": "server decode-log gen throughput (tok/s) in the concurrency bucket, "
                  "as the exporter saw it; speedup = that / the profile's baseline",
        "ranked": measured,
        "unmeasured": unmeasured,
        "failed": failed,
        "invalid": invalid,
        "pending": pending,
        "best": measured[0] if measured else None,
        "standin": any(r.get("standin") for r in measured + unmeasured),
    }


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def markdown(report: dict[str, Any]) -> str:
    c, b = report["concurrency"], report["bucket"]
    lines = [f"# Tuning report: {report['host']} ({report['profile']})", ""]
    if report["standin"]:
        lines += ["> Measured on the CPU **stand-in** (docs/standin.md), not SGLang: the numbers "
                  "come from its documented behaviour model.", ""]
    lines += [
        f"- run: `{report['run_dir']}`, {report['generated_at']}",
        f"- ranked at concurrency {c} (bucket `{b}`), baseline {report['baseline_tok_s']:.1f} "
        "tok/s without speculation (the profile's `baseline`)",
        f"- metric: {report['metric']}",
        "",
        f"| rank | point | steps | top-k | draft tokens | server gen tok/s @{c} | speedup "
        "| accept len | client agg tok/s |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["ranked"]:
        current = " (current)" if row["id"] == report.get("current") else ""
        lines.append(
            f"| {row['rank']} | `{row['id']}`{current} | {row['num_steps']} | {row['eagle_topk']} "
            f"| {row['num_draft_tokens']} | {_fmt(row['server_gen_tok_s'])} "
            f"| {row['speedup']:.2f}x | {_fmt(row.get('accept_length'), '.2f')} "
            f"| {_fmt(row.get('agg_tok_s'))} |"
        )
    best = report["best"]
    lines.append("")
    if best is None:
        lines.append("**No point was measured**: nothing to apply.")
    else:
        verdict = "faster" if best["speedup"] > 1 else "NOT faster: speculation does not pay here"
        lines.append(
            f"**Best: `{best['id']}`** (steps {best['num_steps']}, top-k {best['eagle_topk']}, "
            f"draft tokens {best['num_draft_tokens']}): {best['speedup']:.2f}x the baseline at "
            f"concurrency {c}, {verdict}."
        )
    for title, key in (("Failed (skipped; the last good server was restored)", "failed"),
                       ("Invalid (refused by the `specserve check` rules, not run)", "invalid"),
                       ("Measured without a server number", "unmeasured")):
        if report[key]:
            lines += ["", f"## {title}", "", "| point | why |", "| --- | --- |"]
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
    values = [0.0] * len(failed) + [r["server_gen_tok_s"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 1.4 + 0.45 * max(len(labels), 1)))
    colors = ["#d62728"] * len(failed) + [
        "#1f77b4" if r["speedup"] > 1 else "#ff7f0e" for r in rows]
    bars = ax.barh(labels, values, color=colors)
    for bar in bars[: len(failed)]:
        ax.text(0, bar.get_y() + bar.get_height() / 2, " failed: skipped, rolled back",
                va="center", fontsize=9, color="#d62728")
    for bar, row in zip(bars[len(failed):], rows, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                f" {row['speedup']:.2f}x", va="center", fontsize=9)
    ax.axvline(report["baseline_tok_s"], color="grey", linestyle="--",
               label=f"baseline {report['baseline_tok_s']:.1f} tok/s (no speculation)")
    ax.set_xlabel(f"server gen throughput at concurrency {report['concurrency']} (tok/s)")
    title = f"Speculative parameters: {report['host']}"
    if report["standin"]:
        title += " (CPU stand-in, not SGLang)"
    ax.set_title(title)
    ax.set_xlim(0, max([*values, report["baseline_tok_s"]]) * 1.2)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def report(run_dir: Path, concurrency: int, baseline: dict[str, float], current: str,
           host: str) -> dict[str, Any]:
    state = load_state(run_dir)
    result = rank(state, run_dir, concurrency, {str(k): float(v) for k, v in baseline.items()})
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
    args = parser.parse_args(argv)
    try:
        if args.command == "init":
            out = init(args.run_dir, args.points, args.settings)
        elif args.command == "mark":
            out = mark(args.run_dir, args.point, args.status, args.reason)
        else:
            out = report(args.run_dir, args.concurrency, args.baseline, args.current, args.host)
    except TuneError as exc:
        print(f"tune_run.py: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
