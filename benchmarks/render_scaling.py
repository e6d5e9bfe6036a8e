"""Render time against the profile's size: `specserve render` and the launcher's dry run must
grow linearly with the extra_args they carry.

    .venv/bin/python -m benchmarks.render_scaling [--runs 7] [--dry-runs 3] [--json FILE]

Profiles: the CPU stand-in's, with legitimate `server.extra_args` of about 10 KB, 100 KB and
1 MB (the 1 MiB file limit is the top), in two shapes:

- `pairs`: `--chat-template VALUE` pairs, 2,000-byte values (5, 50, 500 pairs);
- `one flag`: `--lora-paths` followed by 1,000-byte NAME=PATH values (10, 100, 1,000 of them),
  the shape whose shell rendering was quadratic (each value appended to its flag's line by
  string concatenation copied the line: 900 MB of argv took over 150 s).

Stages, each the median of `--runs` in-process runs (time.process_time): `load` (read, bounded
YAML, schema), `check` (run_checks, configs only), `render`, `format` (format_shell, what
`render` prints and the launcher logs). The peer is the same format step building lines the
old way (`format (old)`, string `+=` per value), in the same run on the same input. `dry run` is
a real `specserve-launch --dry-run` process (the stand-in's parser; CPU of the children, median
of `--dry-runs`). The growth ratio is each size's figure over the size ten times smaller's:
linear work gives at most 10 (less, with fixed costs), quadratic work about 100.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.loader import load_profile
from specserve.profile.render import Rendered, format_shell, render

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"10 KB": 10_000, "100 KB": 100_000, "1 MB": 1_000_000}
LAUNCH = str(Path(sys.executable).with_name("specserve-launch"))


def _base() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "profiles" / "standin-cpu.yaml").read_text())
    models = ROOT / "tests" / "fixtures" / "models"
    doc["target"]["path"] = str(models / "Llama-3.1-8B-Instruct")
    doc["drafter"]["path"] = str(models / "EAGLE3-LLaMA3.1-Instruct-8B")
    doc["logging"]["file"] = None
    return doc


def extra_args(shape: str, size: int) -> list[str]:
    if shape == "pairs":
        return [
            w for i in range(size // 2000) for w in ("--chat-template", f"t{i}".ljust(2000, "x"))
        ]
    values = [f"lora{i}=/models/loras/{'a' * 1000}"[:1000] for i in range(size // 1000)]
    return ["--lora-paths", *values]


def _median_cpu(step: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _format_appending(rendered: Rendered) -> str:
    """format_shell as it was before the fix (render.py at 5e6d5de): the same quoting, each
    value appended to its line's string."""
    lines = [f"{k}={shlex.quote(v)}" for k, v in rendered.env.items()]
    if lines:
        lines.insert(0, "env")
    words = [shlex.quote(arg) for arg in rendered.argv]  # the stand-in profile has no API key
    command: list[str] = []
    for word, arg in zip(words, rendered.argv, strict=True):
        if arg.startswith("--") or not command:
            command.append(word)
        else:
            command[-1] += " " + word
    return " \\\n  ".join(lines + command) + "\n"


def _dry_run(path: Path, runs: int) -> float | None:
    """Median CPU seconds of a real `specserve-launch --dry-run`; None when it fails."""
    times = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([LAUNCH, "--dry-run", str(path)], capture_output=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            sys.stderr.write(f"dry run of {path.name} exited {done.returncode}: "
                             f"{done.stderr.decode(errors='replace')[-400:]}\n")  # fmt: skip
            return None
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def measure(shape: str, size: int, runs: int, dry_runs: int, tmp: Path) -> dict[str, Any]:
    doc = _base()
    doc["server"]["extra_args"] = extra_args(shape, size)
    path = tmp / f"{shape.replace(' ', '-')}-{size}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 30))
    profile = load_profile(path)
    options = CheckOptions(configs_only=True)
    issues = [i for i in run_checks(profile, options) if i.severity.value == "error"]
    if issues:
        sys.exit(f"{path.name} does not pass check: {issues[0].render()}")
    rendered = render(profile)
    return {
        "file_bytes": path.stat().st_size,
        "load": _median_cpu(lambda: load_profile(path), runs),
        "check": _median_cpu(lambda: run_checks(profile, options), runs),
        "render": _median_cpu(lambda: render(profile), runs),
        "format": _median_cpu(lambda: format_shell(rendered), runs),
        "format (old)": _median_cpu(lambda: _format_appending(rendered), runs),
        "dry run": _dry_run(path, dry_runs) if dry_runs else None,
    }


STAGES = ("load", "check", "render", "format", "format (old)", "dry run")


def report(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = []
    for shape, by_size in results.items():
        lines.append(f"\n{shape}: median CPU ms (growth over the size 10x smaller)")
        lines.append(f"{'size':>8} {'file':>10} " + " ".join(f"{s:>16}" for s in STAGES))
        previous: dict[str, Any] | None = None
        for label, row in by_size.items():
            cells = []
            for stage in STAGES:
                value = row[stage]
                if value is None:
                    cells.append(f"{'-':>16}")
                    continue
                ratio = ""
                if previous is not None and previous[stage]:
                    ratio = f" (x{value / previous[stage]:.1f})"
                cells.append(f"{value * 1000:.2f}{ratio}".rjust(16))
            lines.append(f"{label:>8} {row['file_bytes']:>10,} " + " ".join(cells))
            previous = row
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dry-runs", type=int, default=3, help="0 skips the dry run")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("pairs", "one flag"):
            results[shape] = {
                label: measure(shape, size, args.runs, args.dry_runs, Path(tmp))
                for label, size in SIZES.items()
            }
    sys.stdout.write(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
