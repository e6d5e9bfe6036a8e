"""results.md: the run as a Markdown table a person reads (or pastes into an issue)."""

from __future__ import annotations

from typing import Any

from specserve.bench.native import format_bucket
from specserve.buckets import concurrency_bucket

COLUMNS = (
    "concurrency",
    "ok/requests",
    "agg tok/s",
    "req tok/s p50",
    "client TTFT p50 ms",
    "client TTFT p99 ms",
    "client ITL p50 ms",
    "client ITL p99 ms",
    "server TTFT p99 bucket",
    "server ITL p99 bucket",
    "accept len",
    "server gen tok/s",
    "speedup",
)


def _fmt(value: float | None, digits: int = 1, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}"


def speculative_summary(server: dict[str, Any]) -> str:
    spec = server.get("speculative")
    if not spec:
        return "no speculation"
    return (
        f"{spec['algorithm']}, steps {spec['num_steps']}, top-k {spec['eagle_topk']}, "
        f"draft tokens {spec['num_draft_tokens']}"
    )


def _server_p99(server: dict[str, Any], key: str) -> str:
    """The bucket that holds SGLang's p99; a result written before schema 2 carries the old
    interpolated number, shown as such."""
    if f"{key}_p99_bucket_s" in server:
        return format_bucket(server[f"{key}_p99_bucket_s"])
    legacy = server.get(f"{key}_p99_s")
    return "-" if legacy is None else f"~{legacy * 1000:.1f} ms (interpolated)"


def _server_gen(level: dict[str, Any]) -> float | None:
    exporter = level.get("exporter") or {}
    value: float | None = (exporter.get("gen_throughput_tok_s") or {}).get(
        concurrency_bucket(level["concurrency"])
    )
    return value


def _row(level: dict[str, Any], with_baseline: bool) -> list[str]:
    exporter = level.get("exporter") or {}
    server = level.get("server_latency") or {}
    if level["ok"] == 0:
        first = level["errors"][0]["message"] if level["errors"] else "unknown error"
        agg = f"all failed: {first[:80]}"
    else:
        agg = _fmt(level["agg_tok_s"])
    speedup = level.get("speedup")
    cells = [
        str(level["concurrency"]),
        f"{level['ok']}/{level['requests']}",
        agg,
        _fmt(level["request_tok_s"]["p50"]),
        _fmt(level["ttft_s"]["p50"], scale=1000),
        _fmt(level["ttft_s"]["p99"], scale=1000),
        _fmt(level["itl_s"]["p50"], 2, 1000),
        _fmt(level["itl_s"]["p99"], 2, 1000),
        _server_p99(server, "ttft"),
        _server_p99(server, "itl"),
        _fmt(exporter.get("accept_length"), 2),
        _fmt(_server_gen(level)),
    ]
    if with_baseline:
        cells.append("-" if speedup is None else f"{speedup:.2f}x")
    return cells


def _survival(values: list[float]) -> str:
    return " ".join(f"{k}:{v:.2f}" for k, v in enumerate(values, start=1)) or "-"


def acceptance_lines(result: dict[str, Any]) -> list[str]:
    """Per concurrency and prompt class: the per-request accept length's distribution and how
    often each draft position survived; nothing when no level carried SGLang's details."""
    rows = []
    for level in result["levels"]:
        section = level.get("acceptance")
        if not section:
            continue
        for kind, part in [("all", section), *sorted(section["by_kind"].items())]:
            dist = part["accept_length"]
            rows.append(
                f"| {level['concurrency']} | {kind} | {dist['n']} | {_fmt(dist['p10'], 2)} | "
                f"{_fmt(dist['p50'], 2)} | {_fmt(dist['p90'], 2)} | {part['verify_passes']} | "
                f"{_survival(part['position_survival'])} |"
            )
    if not rows:
        return []
    return [
        "",
        "## Acceptance per request, class and draft position",
        "",
        "From SGLang's per-request speculative details (`sglext.spec_tokens_details`): accept "
        "length = a request's completion tokens / its verify passes; p10/p50/p90 over the "
        "requests of the class (n). Position k survives a verify pass when the pass accepts at "
        "least k drafts (`spec_correct_drafts_histogram`): P(accepted >= k); a position that "
        "rarely survives says fewer draft tokens would do.",
        "",
        "| concurrency | class | n | accept len p10 | p50 | p90 | verify passes | "
        "P(position k survives) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
        *rows,
    ]


def degenerate_lines(result: dict[str, Any]) -> list[str]:
    """The levels whose outputs repeated themselves, with the measure and the prompts."""
    flagged = [lv for lv in result["levels"] if (lv.get("degenerate") or {}).get("count")]
    if not flagged:
        return []
    first = flagged[0]["degenerate"]
    lines = [
        "",
        "## Degenerate outputs",
        "",
        f"Requests whose {first['measure']} (the share of repeated 4-grams, Welleck et al. "
        f"2019) exceeds {first['threshold']:g}: looping output, which inflates accept length.",
        "",
    ]
    for lv in flagged:
        deg = lv["degenerate"]
        lines.append(
            f"- concurrency {lv['concurrency']}: {deg['count']} of {deg['judged']} requests "
            f"degenerate ({deg['share']:.0%}); prompts {', '.join(deg['prompt_ids'][:10])}"
        )
    return lines


def markdown(result: dict[str, Any]) -> str:
    """Heading, run facts and one row per level; a speedup column when a baseline is attached."""
    server = result["server"]
    settings = result["settings"]
    baseline = result.get("baseline")
    lines = [
        f"# specserve bench: {result['label']}",
        "",
        f"- server: {result['url']} ({server['model']}, version {server['version'] or '?'})",
        f"- speculative decoding: {speculative_summary(server)}",
        f"- prompts: {settings['prompts']} (kinds {', '.join(settings['kinds'])}), "
        f"{settings['max_tokens']} output tokens per request, temperature "
        f"{settings['temperature']:g}",
        f"- run: {result['started_at']} to {result['finished_at']}",
    ]
    if baseline:
        lines.append(
            f"- baseline: {baseline['label']} ({baseline['file'] or baseline['url']}); "
            f"speedup = agg tok/s / baseline agg tok/s at the same concurrency"
        )
    if server.get("standin"):
        scale = (server["info"].get("standin_knobs") or {}).get("time_scale")
        factor = f"{1 / scale:g} x" if scale else "?"
        lines.append(
            f"- **stand-in server, not SGLang**: a simulated model; client-side (wall-clock) "
            f"numbers are {factor} the model's because SPECSERVE_STANDIN_TIME_SCALE={scale}; "
            f"accept len and server gen tok/s are in model time"
        )
    lines += [
        "",
        "agg tok/s: output tokens of all requests / wall time of the level. req tok/s: one "
        "request's tokens after the first / time after the first. client TTFT / ITL: measured "
        "by the bench for every request (ITL: gap between streamed chunks, one chunk per verify "
        "pass when speculating). server TTFT / ITL p99 bucket: the bucket of SGLang's own "
        "histograms (--enable-metrics; ITL per token, as the SLO alerts read it) that holds the "
        "p99, as bounds, not a number: '<= 100 ms' is the first bucket, '100-200 ms' above 100 "
        "and at most 200; '-' without them. accept len and server gen tok/s: "
        "what the exporter saw in the server's decode log during the level (gen tok/s of the "
        "level's concurrency bucket).",
        "",
    ]
    columns = COLUMNS if baseline else COLUMNS[:-1]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "|".join("---:" for _ in columns) + "|")
    lines.extend(
        "| " + " | ".join(_row(level, bool(baseline))) + " |" for level in result["levels"]
    )
    lines += acceptance_lines(result) + degenerate_lines(result)
    problems = [
        f"- concurrency {lv['concurrency']}: {e['count']} x {e['message']}"
        for lv in result["levels"]
        for e in lv["errors"]
    ]
    short = [lv for lv in result["levels"] if lv["short_outputs"]]
    if short:
        problems += [
            f"- concurrency {lv['concurrency']}: {lv['short_outputs']} responses shorter than "
            f"{settings['max_tokens']} tokens: the server may not honour ignore_eos"
            for lv in short
        ]
    problems += [
        f"- concurrency {lv['concurrency']}: exporter: {lv['exporter_error']}"
        for lv in result["levels"]
        if lv.get("exporter_error")
    ]
    if problems:
        lines += ["", "## Problems", "", *problems]
    return "\n".join(lines) + "\n"
