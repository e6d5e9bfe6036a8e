"""Exporter throughput, memory and latency, side by side with its peers in the same run.

    python -m benchmarks.exporter_throughput [--lines 1000000] [--soak-lines 10000000]

Prints, for one generated SGLang log (80% decode, 10% prefill, 10% HTTP lines):
- lines/s of `specserve-exporter --once` (read from the start until the last metric is updated),
  of `mtail --one_shot` with an equivalent program (benchmarks/mtail/sglang.mtail), and of bare
  Python loops that only read and filter the file (binary and text mode); the ratios;
- the exporter's peak RSS in that run;
- RSS over a longer soak (memory must stay flat);
- the delay from a line written to the followed file until /metrics shows it (p50/p99).
Each timed figure is the median of --repeat runs: these machines are noisy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks import sglang_log
from specserve_exporter import names

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = [sys.executable, "-m", "specserve_exporter"]


def timed(cmd: list[str]) -> float:
    """Wall seconds of one child process."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.decode()[-2000:]}")
    return elapsed


# Linux carries a process's peak RSS across exec, and a child that Python starts with vfork
# begins with its parent's peak: this benchmark, which generated the log, would be measured
# instead of the exporter. A small probe process forks (a fresh peak) and execs the command.
RSS_PROBE = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_rss_kib(cmd: list[str]) -> int:
    """Peak RSS of the command alone (floor: the probe's own interpreter, about 10 MiB)."""
    proc = subprocess.run([sys.executable, "-c", RSS_PROBE, *cmd], capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.decode()[-2000:]}")
    return int(proc.stdout.split()[-1])


# The bare loops run as fresh processes too, like the exporter and mtail: every reader pays for
# its interpreter's start, and none gets a page cache or heap warmed by another.
BARE_BINARY = """
import sys
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if b"Decode batch" in line or b"Prefill batch" in line:
            n += 1
print(n)
"""
BARE_TEXT = """
import sys
n = 0
with open(sys.argv[1]) as f:
    for line in f:
        if "Decode batch" in line or "Prefill batch" in line:
            n += 1
print(n)
"""


def soak(lines: int) -> list[tuple[int, float]]:
    """RSS (MiB) of an in-process exporter state after each tenth of `lines` fed to it."""
    from specserve_exporter.ingest import Ingestor
    from specserve_exporter.state import LogState, SpeculationConfig

    def rss_mib() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    ingestor = Ingestor(LogState(SpeculationConfig(draft_tokens=4, baseline={"1": 90.0})))
    points = []
    step = lines // 10
    batch: list[str] = []
    for i, line in enumerate(sglang_log.lines(lines, seed=2), start=1):
        batch.append(line)
        if len(batch) == 20000:
            ingestor.feed("".join(batch).encode())
            batch.clear()
        if i % step == 0:
            points.append((i, rss_mib()))
    return points


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def latency(samples: int, workdir: Path) -> list[float]:
    """Seconds from writing a decode line to seeing it counted in /metrics."""
    log = workdir / "follow.log"
    log.write_text("")
    port = free_port()
    proc = subprocess.Popen(
        [*EXPORTER, "--file", str(log), "--listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"

    def decode_count() -> float:
        with urllib.request.urlopen(url, timeout=2) as resp:
            for raw in resp.read().decode().splitlines():
                if raw.startswith(f'{names.LOG_LINES_PARSED.total}{{kind="decode"}}'):
                    return float(raw.split()[-1])
        return 0.0

    try:
        deadline = time.time() + 10
        while True:
            try:
                decode_count()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        line = next(iter(sglang_log.lines(10, seed=3)))
        while "Decode" not in line:
            line = next(iter(sglang_log.lines(10, seed=4)))
        delays = []
        with log.open("a") as out:
            for i in range(samples):
                before = decode_count()
                start = time.perf_counter()
                out.write(line)
                out.flush()
                while decode_count() <= before:
                    if time.perf_counter() - start > 5:
                        raise SystemExit("a written line did not show up in /metrics within 5 s")
                    time.sleep(0.005)
                delays.append(time.perf_counter() - start)
                time.sleep(0.02 * (i % 5))  # land at different points of the poll interval
        return delays
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--soak-lines", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()
    mtail = shutil.which("mtail")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        log = sglang_log.write(workdir / "sglang.log", args.lines)
        size_mb = log.stat().st_size / 2**20
        print(f"log: {args.lines:,} lines, {size_mb:.0f} MiB (80% decode, 10% prefill, 10% HTTP)")
        readers = {
            "specserve-exporter --once": [
                *EXPORTER, "--source", "file", "--file", str(log), "--once"],
            "bare Python loop, binary read + filter": [
                sys.executable, "-c", BARE_BINARY, str(log)],
            "bare Python loop, text read + filter": [sys.executable, "-c", BARE_TEXT, str(log)],
        }
        if mtail:
            readers["mtail --one_shot, equivalent program"] = [
                mtail, "--one_shot", "--one_shot_format", "prometheus",
                "--progs", str(ROOT / "benchmarks" / "mtail"), "--logs", str(log)]
        timed(readers["bare Python loop, binary read + filter"])  # warm the page cache for all
        # Round-robin, so a slow spell of the machine hits every reader alike.
        times: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.repeat):
            for name, cmd in readers.items():
                times[name].append(timed(cmd))
        rate = {name: args.lines / statistics.median(t) for name, t in times.items()}
        exporter = rate.pop("specserve-exporter --once")
        print(f"\nlines/s, median of {args.repeat} runs, each reader a fresh process")
        print(f"{'reader':<44}{'lines/s':>14}{'exporter / it':>16}")
        print(f"{'specserve-exporter --once':<44}{exporter:>14,.0f}")
        for name, peer in rate.items():
            print(f"{name:<44}{peer:>14,.0f}{exporter / peer:>15.2f}x")
        if not mtail:
            print("mtail not installed: apt-get install mtail")
        rss_exporter = peak_rss_kib(readers["specserve-exporter --once"]) / 1024
        print(f"\nexporter peak RSS in that run: {rss_exporter:.1f} MiB (target < 60 MiB)")

        if args.soak_lines:
            print(f"\nsoak: RSS while feeding {args.soak_lines:,} lines in-process")
            points = soak(args.soak_lines)
            for count, rss in points:
                print(f"  after {count:>12,} lines: {rss:7.1f} MiB")
            growth = points[-1][1] - points[0][1]
            print(f"  growth from first to last tenth: {growth:+.1f} MiB")

        if args.latency_samples:
            delays = latency(args.latency_samples, workdir)
            q = statistics.quantiles(delays, n=100)
            print(f"\nline written -> visible in /metrics ({len(delays)} samples): "
                  f"p50 {statistics.median(delays) * 1000:.0f} ms, p99 {q[98] * 1000:.0f} ms "
                  "(target p99 < 1000 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
