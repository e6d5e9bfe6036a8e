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
import resource
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

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = [sys.executable, "-m", "specserve_exporter"]


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(before, after)


def peak_rss_kib(cmd: list[str]) -> int:
    """Peak RSS of exactly this child (ru_maxrss of RUSAGE_CHILDREN is a max over all children)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed")
    return usage.ru_maxrss


def bare_binary(path: Path) -> int:
    n = 0
    with path.open("rb") as f:
        for line in f:
            if b"Decode batch" in line or b"Prefill batch" in line:
                n += 1
    return n


def bare_text(path: Path) -> int:
    n = 0
    with path.open() as f:
        for line in f:
            if "Decode batch" in line or "Prefill batch" in line:
                n += 1
    return n


def median_time(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
                if raw.startswith('specserve_log_lines_parsed_total{kind="decode"}'):
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
        bare_binary(log)  # warm the page cache for everyone

        exporter_cmd = [*EXPORTER, "--source", "file", "--file", str(log), "--once"]
        t_exporter = statistics.median(timed(exporter_cmd)[0] for _ in range(args.repeat))
        rss_exporter = peak_rss_kib(exporter_cmd) / 1024
        t_binary = median_time(lambda: bare_binary(log), args.repeat)
        t_text = median_time(lambda: bare_text(log), args.repeat)
        t_mtail = None
        if mtail:
            mtail_cmd = [mtail, "--one_shot", "--one_shot_format", "prometheus", "--progs",
                         str(ROOT / "benchmarks" / "mtail"), "--logs", str(log)]
            t_mtail = statistics.median(timed(mtail_cmd)[0] for _ in range(args.repeat))

        rate = args.lines / t_exporter
        print(f"\n{'reader':<44}{'lines/s':>14}{'exporter / it':>16}")
        label = f"specserve-exporter --once (median of {args.repeat})"
        print(f"{label:<44}{rate:>14,.0f}")
        if t_mtail is not None:
            m = args.lines / t_mtail
            print(f"{'mtail --one_shot, equivalent program':<44}{m:>14,.0f}{rate / m:>15.2f}x")
        else:
            print("mtail not installed: apt-get install mtail")
        b = args.lines / t_binary
        t = args.lines / t_text
        print(f"{'bare Python loop, binary read + filter':<44}{b:>14,.0f}{rate / b:>15.2f}x")
        print(f"{'bare Python loop, text read + filter':<44}{t:>14,.0f}{rate / t:>15.2f}x")
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
