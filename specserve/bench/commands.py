"""What `specserve bench`, `bench baseline-from` and `bench report` do (flags: cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml

from specserve.apikey import API_KEY_ENV, ApiKeyError, read_api_key
from specserve.bench.baseline import BaselineError, baseline_block
from specserve.bench.exporter import ExporterError, ExporterScraper
from specserve.bench.promptset import PromptError, load_prompts, select_kinds
from specserve.bench.report import markdown, speculative_summary
from specserve.bench.results import (
    ResultError,
    attach_baseline,
    build_result,
    load_result,
    now_iso,
    write_result,
)
from specserve.bench.runner import Progress, RunSettings, run_all, warm_up
from specserve.bench.server import ServerError, probe, redact_result
from specserve.profile.classlabel import label_name_problem
from specserve.profile.loader import ProfileError, load_profile

EXIT_OK, EXIT_LEVEL_FAILED, EXIT_USAGE = 0, 1, 2
OUTPUTS = ("results.json", "results.md", "plot.png")
ACCEPTANCE_PLOT = "acceptance.png"  # written when the server returned speculative details
MAX_CONCURRENCY = 4096


class UsageError(ValueError):
    """A flag's value cannot be used; the message names the flag and the fix."""


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"specserve bench: error: {message}\n")
    return code


def parse_concurrency(text: str) -> tuple[int, ...]:
    levels: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_CONCURRENCY:
            raise UsageError(
                f"--concurrency: {part!r} is not a whole number in 1..{MAX_CONCURRENCY}; "
                f"write e.g. 1,2,4,8"
            )
        levels.add(int(part))
    return tuple(sorted(levels))


def api_key(args: argparse.Namespace) -> str | None:
    try:
        return read_api_key(args.api_key_file)
    except ApiKeyError as exc:
        raise UsageError(str(exc)) from None


def _out_dir(args: argparse.Namespace) -> Path:
    out: Path = args.out_dir
    existing = [name for name in OUTPUTS if (out / name).exists()]
    if existing and not args.overwrite:
        raise UsageError(
            f"--out-dir {out} already holds {', '.join(existing)}; choose another directory or "
            f"pass --overwrite"
        )
    # Checked before the run (without creating anything): a long run must not end unwritable.
    ancestor = out.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"--out-dir {out}: {ancestor} is not a writable directory")
    return out


def write_outputs(result: dict[str, Any], baseline: dict[str, Any] | None, out: Path) -> None:
    # matplotlib is slow to import; only when needed
    from specserve.bench.acceptplot import has_acceptance, plot_acceptance
    from specserve.bench.plot import plot

    out.mkdir(parents=True, exist_ok=True)
    write_result(result, out / "results.json")
    (out / "results.md").write_text(markdown(result), encoding="utf-8")
    plot(result, baseline, out / "plot.png")
    if has_acceptance(result):
        plot_acceptance(result, out / ACCEPTANCE_PLOT)
    else:  # an --overwrite run must not keep an earlier run's plot beside its results
        (out / ACCEPTANCE_PLOT).unlink(missing_ok=True)


def _settings_doc(
    args: argparse.Namespace, settings: RunSettings, prompts_desc: str, kinds: list[str], count: int
) -> dict[str, Any]:
    return {
        "concurrency": list(settings.concurrency),
        "requests_per_level": settings.requests_per_level,
        "duration_s": settings.duration_s,
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        "prompts": prompts_desc,
        "kinds": kinds,
        "prompt_count": count,
        "exporter_url": args.exporter_url,
        "class_label": settings.class_label,
        "warmup_requests": settings.warmup_requests,
        "request_timeout_s": settings.request_timeout_s,
    }


def cmd_run(args: argparse.Namespace) -> int:
    progress = Progress()
    try:
        if not args.url:
            raise UsageError("--url is required: the server's base URL, e.g. http://127.0.0.1:8000")
        base_url = args.url.rstrip("/")
        levels = parse_concurrency(args.concurrency)
        if args.requests_per_level is not None and args.requests_per_level < levels[-1]:
            raise UsageError(
                f"--requests-per-level {args.requests_per_level} is below the highest "
                f"concurrency {levels[-1]}: that level would never reach its concurrency"
            )
        if args.max_tokens < 1 or (args.duration is not None and args.duration <= 0):
            raise UsageError("--max-tokens and --duration must be positive")
        out = _out_dir(args)
        key = api_key(args)
        prompts, prompts_desc = load_prompts(args.prompts)
        if args.class_label is not None:
            problem = label_name_problem(args.class_label)
            if problem is not None:
                raise UsageError(f"--class-label: {problem}")
        kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
        chosen = select_kinds(prompts, kinds)
        baseline = load_result(args.baseline_json) if args.baseline_json else None
        if baseline is not None:
            baseline = redact_result(baseline, (key,))
    except (UsageError, PromptError, ResultError) as exc:
        return _fail(str(exc))

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(timeout=httpx.Timeout(30.0), headers=headers) as client:
            facts = probe(client, base_url, args.model, secrets=(key,))
    except ServerError as exc:
        return _fail(str(exc))
    scraper = None
    if args.exporter_url:
        scraper = ExporterScraper(args.exporter_url, settle_timeout=args.exporter_settle_timeout)
        try:
            scraper.scrape()
        except ExporterError as exc:
            scraper.close()
            return _fail(str(exc))

    settings = RunSettings(
        base_url=base_url,
        model=facts.model,
        concurrency=levels,
        requests_per_level=args.requests_per_level,
        duration_s=args.duration,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        request_timeout_s=args.request_timeout,
        warmup_requests=args.warmup_requests,
        headers=headers,
        class_label=args.class_label,
    )
    label = args.label or ("speculative" if facts.speculative else "baseline")
    kinds_used = sorted({p.kind for p in chosen})
    progress.note(
        f"specserve bench: {base_url} serves {facts.model}; speculative decoding: "
        f"{speculative_summary({'speculative': facts.speculative})}; label {label!r}; "
        f"levels {','.join(map(str, levels))}; {len(chosen)} prompts ({','.join(kinds_used)})"
    )
    started = now_iso()
    try:
        failed_warmup = [r for r in warm_up(settings, chosen) if not r.ok]
        if failed_warmup:
            return _fail(f"warm-up request failed: {failed_warmup[0].error}")
        results_levels = run_all(settings, chosen, scraper, progress)
    finally:
        if scraper is not None:
            scraper.close()

    settings_doc = _settings_doc(args, settings, prompts_desc, kinds_used, len(chosen))
    result = build_result(label, base_url, settings_doc, facts, results_levels, started)
    # Error messages and labels may quote the server; nothing written may carry a secret.
    result = redact_result(result, (key,))
    if baseline is not None:
        attach_baseline(result, baseline, str(args.baseline_json))
    try:
        write_outputs(result, baseline, out)
    except OSError as exc:
        return _fail(f"--out-dir {out}: cannot write the results: {exc}")
    sys.stdout.write(markdown(result))
    progress.note(f"specserve bench: wrote {', '.join(str(out / n) for n in OUTPUTS)}")
    all_failed = [lv["concurrency"] for lv in results_levels if lv["ok"] == 0]
    if all_failed:
        return _fail(
            f"every request failed at concurrency {', '.join(map(str, all_failed))} "
            f"(see the Problems section of {out / 'results.md'})",
            EXIT_LEVEL_FAILED,
        )
    return EXIT_OK


def cmd_baseline_from(args: argparse.Namespace) -> int:
    try:
        result = load_result(args.result)
        profile = load_profile(args.profile) if args.profile else None
        block = baseline_block(result, args.metric, args.allow_speculative, profile, args.image)
    except (ResultError, BaselineError) as exc:
        return _fail(str(exc))
    except ProfileError as exc:
        return _fail(f"--profile {args.profile}: {exc}")
    scale = (result["server"]["info"].get("standin_knobs") or {}).get("time_scale")
    if result["server"]["standin"] and scale not in (None, 1, 1.0) and "client" in block["source"]:
        sys.stderr.write(
            f"specserve bench: warning: client-side tok/s of a stand-in run at "
            f"SPECSERVE_STANDIN_TIME_SCALE={scale} are {1 / scale:g} times the model's; "
            f"measure with --exporter-url for model-time numbers\n"
        )
    if args.format == "json":
        sys.stdout.write(json.dumps({"baseline": block}, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump({"baseline": block}, sort_keys=False, width=100))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    try:
        result = load_result(args.result)
        baseline = load_result(args.baseline_json) if args.baseline_json else None
        out = _out_dir(args)
    except (ResultError, UsageError) as exc:
        return _fail(str(exc))
    # A result written before by-value redaction may still carry the key in launch_command.
    key = os.environ.get(API_KEY_ENV, "").strip() or None
    result = redact_result(result, (key,))
    if baseline is not None:
        baseline = redact_result(baseline, (key,))
        attach_baseline(result, baseline, str(args.baseline_json))
    write_outputs(result, baseline, out)
    sys.stdout.write(markdown(result))
    return EXIT_OK


def cmd_run_or_usage(args: argparse.Namespace) -> int:
    if args.out_dir is None:
        return _fail("--out-dir is required: where results.json, results.md and plot.png go")
    return cmd_run(args)
