"""The ranking: every measured candidate, no speculation included, by measured throughput at
one concurrency or weighted over a traffic mix; which configuration wins at each benched
concurrency, where speculation stops paying (the crossover), and one sentence saying it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specserve.bench.degenerate import REFUSE_SHARE
from specserve.buckets import concurrency_bucket
from specserve.tune.measure import measure


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


def _measured_row(row: dict[str, Any], run_dir: Path, concurrency: int, mix: dict[int, float],
                  benched: list[int]) -> dict[str, Any]:
    """A finished candidate's row: its numbers at every benched level and the ranking figure
    (`tok_s`, None with a note when the server gave none)."""
    ranked_at = list(mix) if mix else [concurrency]
    levels = {c: measure(run_dir, row["id"], c) for c in benched}
    row["levels"] = levels
    if not mix:  # one concurrency: its own numbers beside the ranking figure
        here = levels[concurrency]
        row.update({k: here.get(k) for k in ("server_gen_tok_s", "agg_tok_s", "accept_length")})
    row["tok_s"] = _figure(levels, concurrency, mix)
    row["ttft_p99_s"] = _worst(levels, ranked_at, "ttft_p99_s")
    row["itl_p99_s"] = _worst(levels, ranked_at, "itl_p99_s")
    row["standin"] = any(lv.get("standin") for lv in levels.values())
    if row["tok_s"] is None:
        row["note"] = "; ".join(sorted({lv["note"] for lv in levels.values() if lv.get("note")}))
    return row


def degenerated(row: dict[str, Any]) -> str | None:
    """Why a measured point is refused a rank: more than REFUSE_SHARE of its judged requests,
    over every benched level, wrote degenerate (looping) output, which inflates accept length
    and so throughput; None when it did not (or its results predate the measure)."""
    sections = {c: lv["degenerate"] for c, lv in row["levels"].items() if lv.get("degenerate")}
    judged = sum(d["judged"] for d in sections.values())
    count = sum(d["count"] for d in sections.values())
    if not judged or count / judged <= REFUSE_SHARE:
        return None
    first = next(iter(sections.values()))
    where = ", ".join(f"{d['count']} at concurrency {c}" for c, d in sections.items()
                      if d["count"])
    return (f"outputs degenerated: {count} of {judged} requests looped ({first['measure']} > "
            f"{first['threshold']:g}; {where}), more than {REFUSE_SHARE:.0%}: its throughput "
            "is not comparable, so it is not ranked")


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
    measured, unmeasured, failed, invalid, refused = [], [], [], [], []
    for ident in state["order"]:
        point = state["points"][ident]
        row: dict[str, Any] = {"id": ident, **_params(point)}
        if point["status"] == "ok":
            row = _measured_row(row, run_dir, concurrency, mix, benched)
            if (reason := degenerated(row)) is not None:
                refused.append({**row, "reason": reason})
            else:
                (measured if row["tok_s"] is not None else unmeasured).append(row)
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
        "refused": refused,
        "pending": [i for i in state["order"] if state["points"][i]["status"] == "pending"],
        "best": best,
        "verdict": verdict(best, measured, where),
        "per_concurrency": table,
        "crossover": crossover(table),
        "standin": any(r.get("standin") for r in measured + unmeasured + refused),
    }
