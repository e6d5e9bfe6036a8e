"""The launcher's log tee, redaction on, against coreutils `tee` on the same input, same run.

    .venv/bin/python -m benchmarks.tee_redaction [--lines 2000000] [--rounds 5] [--json FILE]
                                                 [--impl PATH]

One input file of SGLang-style log lines (decode lines, prefill lines, and one `server_args={...}`
line with the API key per 1000, as SGLang prints at start) is piped by `cat` into each reader,
which copies it to stdout (/dev/null) and to a log file in a temp dir:

- `coreutils tee FILE`, the named peer;
- the product's tee, redacting: the launcher's own objects and loop (`Tee` with three secrets,
  100 MiB x 5 rotation, the profile's defaults, fed by `specserve.launch.supervise._pump`, the
  select + read loop that `specserve-launch` runs on SGLang's output pipe), in a fresh Python
  process;
- the same without secrets (plain), for what redaction itself costs.

Readers alternate round by round; the figures are medians. Throughput is lines / wall time from
starting the reader to its exit, so the product's includes starting Python and the launcher's
imports; each reader is also run on an empty input, and the figures "after start-up" subtract
that (the tee runs as long as the server, so its start-up is paid once). CPU is the reader's own
user + system time (wait4), per line. Every run's file is checked: coreutils' and the plain
tee's are the input byte for byte, the redacting tee's is the input with every key replaced by
the marker. Target: the redacting tee at >= 0.30x coreutils tee's lines/s, end to end.

`--impl PATH` runs the product's tee from another checkout (PATH holds its `specserve/`), e.g.
an older commit extracted with `git archive`, to compare implementations on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specserve.secrets import MARKER

KEY = "sk-bench-9f8e7d6c5b4a39281706"
HF_TOKEN = "hf_benchTokenAbCdEfGhIjKlMnOpQrSt"
GRAFANA = "grafana-bench-pw-31337"
SECRETS = (KEY, HF_TOKEN, GRAFANA)
SECRET_EVERY = 1000
TARGET = 0.30
REPO = Path(__file__).resolve().parents[1]

DECODE = (
    "[2026-12-01 08:00:00 TP0] Decode batch, #running-req: 8, #token: 12345, token usage: 0.05, "
    "accept len: 2.31, accept rate: 0.44, cuda graph: True, gen throughput (token/s): 512.30, "
    "#queue-req: 0\n"
)
PREFILL = (
    "[2026-12-01 08:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
    "token usage: 0.05, #running-req: 7, #queue-req: 0\n"
)
ARGS = (
    "[2026-12-01 08:00:00] server_args=ServerArgs(model_path='/models/Kimi-K2.5', "
    f"api_key={KEY!r}, port=8000, enable_metrics=True)\n"
)

# The product's reader: what specserve-launch builds for a profile with a log file and secrets
# (launcher.py: a buffered dup of stdout as the sink), then the supervisor's pump on stdin.
CHILD = r"""
import json, os, sys
from pathlib import Path
from specserve.launch.logtee import Tee
from specserve.launch.supervise import _pump
log, secrets = sys.argv[1], tuple(json.loads(sys.argv[2]))
assert Tee.__module__ == "specserve.launch.logtee" and sys.path[0] == ""
sink = os.fdopen(os.dup(1), "wb")
tee = Tee(sink, Path(log), 100 * 1024 * 1024, 5, secrets)
_pump(0, tee, -1)
"""


def write_input(path: Path, lines: int) -> int:
    """The input file; returns how many lines carry the key."""
    block, keyed = [], 0
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            if i % SECRET_EVERY == 1:
                block.append(ARGS)
                keyed += 1
            else:
                block.append(PREFILL if i % 50 == 7 else DECODE)
            if len(block) >= 10_000:
                out.write("".join(block))
                block.clear()
        out.write("".join(block))
    return keyed


READERS = ("coreutils tee", "redacting tee", "plain tee")


def _reader(mode: str, log: Path, impl: Path | None) -> tuple[list[str], dict[str, str], Path]:
    """argv, environment and working directory (`python -c` imports from there first)."""
    env = dict(os.environ)
    if mode == "coreutils tee":
        return ["tee", str(log)], env, log.parent
    secrets = list(SECRETS) if mode == "redacting tee" else []
    path = impl.resolve() if impl else REPO
    env["PYTHONPATH"] = str(path) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return [sys.executable, "-c", CHILD, str(log), json.dumps(secrets)], env, path


def one_run(mode: str, source: Path, work: Path, impl: Path | None) -> dict[str, Any]:
    """`cat source | reader > /dev/null`: the reader's wall time from its start to its exit and
    its own CPU time (wait4 on it alone)."""
    log = work / "sglang.log"
    for old in work.glob("sglang.log*"):
        old.unlink()
    argv, env, cwd = _reader(mode, log, impl)
    with open(os.devnull, "wb") as devnull, source.open("rb") as data:
        start = time.perf_counter()
        cat = subprocess.Popen(["cat"], stdin=data, stdout=subprocess.PIPE)
        assert cat.stdout is not None
        reader = subprocess.Popen(argv, stdin=cat.stdout, stdout=devnull, env=env, cwd=cwd)
        cat.stdout.close()
        _, status, usage = os.wait4(reader.pid, 0)
        seconds = time.perf_counter() - start
        reader.returncode = os.waitstatus_to_exitcode(status)
        cat.wait()
    if reader.returncode != 0:
        raise SystemExit(f"{mode}: exited {reader.returncode}")
    return {
        "mode": mode,
        "input": source.name,
        "seconds": seconds,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "files": sorted(work.glob("sglang.log*"), key=_generation, reverse=True),
    }


def _generation(path: Path) -> int:
    suffix = path.name.rpartition(".")[2]
    return int(suffix) if suffix.isdigit() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2_000_000, help="lines per run (2000000)")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each reader (default 5)")
    parser.add_argument("--impl", type=Path, help="the product's tee from this checkout")
    parser.add_argument("--json", type=Path, help="also write the runs and summary here")
    args = parser.parse_args(argv)
    runs: list[dict[str, Any]] = []
    problems: list[str] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tee-bench-") as tmp:
        source, empty = Path(tmp) / "input.log", Path(tmp) / "empty.log"
        keyed = write_input(source, args.lines)
        empty.write_bytes(b"")
        raw = source.read_bytes()
        expected = {
            "coreutils tee": raw,
            "plain tee": raw,
            "redacting tee": raw.replace(KEY.encode(), MARKER.encode()),
        }
        print(f"input: {args.lines:,} lines, {len(raw) / 1e6:.1f} MB, {keyed:,} with the key; "
              f"{args.rounds} rounds, readers alternating", flush=True)  # fmt: skip
        work = Path(tmp) / "out"
        work.mkdir()
        for round_ in range(args.rounds):
            for mode in READERS:
                start_up = one_run(mode, empty, work, args.impl)
                run = one_run(mode, source, work, args.impl)
                data = b"".join(f.read_bytes() for f in run["files"])
                if data != expected[mode]:
                    problems.append(f"{mode}: the log file is not the (redacted) input")
                for r in (start_up, run):
                    r["files"] = len(r["files"])
                    runs.append(r)
                print(f"round {round_ + 1} {mode:14} {run['seconds']:7.3f} s wall, "
                      f"{run['cpu_s']:7.3f} s CPU (start-up alone {start_up['seconds']:.3f} s, "
                      f"{start_up['cpu_s']:.3f} s CPU)", flush=True)  # fmt: skip

    def med(mode: str, key: str, data: str = "input.log") -> float:
        return float(
            statistics.median(r[key] for r in runs if r["mode"] == mode and r["input"] == data)
        )

    lines = args.lines
    summary: dict[str, Any] = {"lines": lines, "bytes": len(raw), "rounds": args.rounds,
                               "load_1m": [load_before, os.getloadavg()[0]],
                               "cpus": os.cpu_count()}  # fmt: skip
    for mode in READERS:
        wall, cpu = med(mode, "seconds"), med(mode, "cpu_s")
        wall0, cpu0 = med(mode, "seconds", "empty.log"), med(mode, "cpu_s", "empty.log")
        summary[mode] = {
            "lines_per_s": lines / wall,
            "mb_per_s": len(raw) / 1e6 / wall,
            "cpu_us_per_line": cpu / lines * 1e6,
            "startup_s": wall0,
            "startup_cpu_s": cpu0,
            "lines_per_s_after_startup": lines / max(wall - wall0, 1e-9),
            "cpu_us_per_line_after_startup": max(cpu - cpu0, 0.0) / lines * 1e6,
        }
    peer = summary["coreutils tee"]
    for mode in READERS[1:]:
        mine = summary[mode]
        mine["ratio"] = mine["lines_per_s"] / peer["lines_per_s"]
        mine["ratio_after_startup"] = (
            mine["lines_per_s_after_startup"] / peer["lines_per_s_after_startup"]
        )
        mine["cpu_per_line_x"] = mine["cpu_us_per_line"] / peer["cpu_us_per_line"]
    summary["problems"] = problems
    print(
        f"\n{'medians':14} {'lines/s':>11} {'MB/s':>7} {'CPU us/line':>11} {'vs tee':>7}"
        f"   | after start-up: {'lines/s':>11} {'CPU us/line':>11} {'vs tee':>7}"
    )
    for mode in READERS:
        row = summary[mode]
        ratio = f"{row.get('ratio', 1.0):.2f}x"
        after = f"{row.get('ratio_after_startup', 1.0):.2f}x"
        print(f"{mode:14} {row['lines_per_s']:11,.0f} {row['mb_per_s']:7.1f} "
              f"{row['cpu_us_per_line']:11.3f} {ratio:>7}   |                 "
              f"{row['lines_per_s_after_startup']:11,.0f} "
              f"{row['cpu_us_per_line_after_startup']:11.3f} {after:>7}")  # fmt: skip
    red = summary["redacting tee"]
    print(
        f"\nload average (1 min) before / after: {summary['load_1m'][0]:.1f} / "
        f"{summary['load_1m'][1]:.1f} on {summary['cpus']} CPUs\n"
        f"start-up alone (empty input): coreutils tee {peer['startup_s'] * 1000:.0f} ms, the "
        f"product's tee {red['startup_s'] * 1000:.0f} ms (Python and the launcher's imports)\n"
        f"redacting tee / coreutils tee, lines/s end to end: {red['ratio']:.2f}x (target >= "
        f"{TARGET:.2f}x: {'met' if red['ratio'] >= TARGET else 'NOT met'}); after start-up "
        f"{red['ratio_after_startup']:.2f}x\n"
        f"redacting / plain tee, lines/s: "
        f"{red['lines_per_s'] / summary['plain tee']['lines_per_s']:.2f}x"
    )
    for problem in problems:
        print(f"PROBLEM: {problem}")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2) + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
