"""CPU time of `specserve check` / `render` on the demo profile against a bare Python start.

    .venv/bin/python -m benchmarks.cli_startup [--runs 21] [--json FILE]

Each command is a fresh process run the way a user runs it (the venv's `specserve` script),
round-robin, `--runs` times; the figure is the median of its user + sys CPU seconds (the
children's rusage around each run), with the median wall time beside it. The peers:

- `python -c pass`: the interpreter's own start, the floor no command goes below;
- `python -c "import specserve.cli"`: the entry point before a subcommand is chosen.

Both bytecode states are measured: `cached` (what an installed package or a second run sees:
bytecode written to a scratch PYTHONPYCACHEPREFIX, warmed once) and `source` (the checkout's own
modules compiled on every start, PYTHONDONTWRITEBYTECODE=1 as in this repository's CI shell;
site-packages keep their installed bytecode). Every command must exit 0, or nothing is reported.

Target: `check` and `render` under 0.2 s of CPU (docs/benchmarks.md, "CLI startup").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "profiles/standin-cpu.yaml"
TARGET_CPU_S = 0.2
TARGETED = ("specserve check", "specserve render")


def commands() -> dict[str, list[str]]:
    python = sys.executable
    specserve = str(Path(python).parent / "specserve")
    return {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import specserve.cli'": [python, "-c", "import specserve.cli"],
        "specserve --version": [specserve, "--version"],
        "specserve check": [specserve, "check", PROFILE, "--configs-only"],
        "specserve render": [specserve, "render", PROFILE, "--configs-only"],
    }


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(user + sys CPU seconds, wall seconds) of one run; exits when the command fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def measure(env: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    table = commands()
    for argv in table.values():  # warm-up: bytecode written, files in the page cache
        _run(argv, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in table}
    for _ in range(runs):
        for name, argv in table.items():
            samples[name].append(_run(argv, env))
    return {
        name: {
            "cpu_s": statistics.median(cpu for cpu, _ in values),
            "wall_s": statistics.median(wall for _, wall in values),
        }
        for name, values in samples.items()
    }


def environments(scratch: Path) -> dict[str, dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {
        "cached": {**base, "PYTHONPYCACHEPREFIX": str(scratch / "pycache")},
        "source": {**base, "PYTHONDONTWRITEBYTECODE": "1"},
    }


def report(mode: str, figures: dict[str, dict[str, float]]) -> list[str]:
    floor = figures["python -c pass"]["cpu_s"]
    lines = [
        f"bytecode {mode}:",
        f"  {'command':<38}{'CPU s':>8}{'wall s':>8}{'/ python -c pass':>18}",
    ]
    for name, fig in figures.items():
        lines.append(
            f"  {name:<38}{fig['cpu_s']:>8.3f}{fig['wall_s']:>8.3f}{fig['cpu_s'] / floor:>17.1f}x"
        )
    worst = max(figures[name]["cpu_s"] for name in TARGETED)
    verdict = "met" if worst < TARGET_CPU_S else "NOT met"
    lines.append(
        f"  target: check and render < {TARGET_CPU_S} s CPU: {verdict} (slowest {worst:.3f} s)"
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="runs per command (median)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="specserve-cli-bench-") as scratch:
        for mode, env in environments(Path(scratch)).items():
            results[mode] = measure(env, args.runs)
            print("\n".join(report(mode, results[mode])), flush=True)
    print(f"(median of {args.runs} runs each, round-robin; {os.cpu_count()} CPUs)")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": args.runs, "figures": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
