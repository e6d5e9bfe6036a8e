"""Lines lost to copytruncate rotation: specserve-exporter and mtail following the same file.

    python -m benchmarks.exporter_rotation [--lines 200000] [--rate 40000] [--repeat 3]

A writer appends SGLang-like lines (benchmarks/sglang_log.py) through one O_APPEND descriptor,
as a server does, at --rate lines/s, and every N lines does what logrotate's copytruncate does
with `rotate K` (--keep): shift sglang.log.1..K-1 up by one, copy the file to sglang.log.1,
then truncate it in place (K = 1: the one copy is overwritten each time). specserve-exporter
(`--source file`, its default 0.1 s poll) and mtail (benchmarks/mtail/sglang.mtail, its default
250 ms poll) follow the file in the same run; once the writer is done and both counts are
still, each one's lines-read counter is compared with the lines written. Figures are medians
of --repeat runs.

A copytruncate always loses what the writer appended after the reader's last read and before
the truncation (those lines are in the backup, which neither tool reads): at 40k lines/s that
is up to one poll interval's worth per rotation. Anything beyond that is the tailer's own loss.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks import sglang_log
from benchmarks.exporter_throughput import EXPORTER, ROOT, free_port
from specserve_exporter import names

BATCH = 500  # lines per write(): 80 writes/s at 40k lines/s, each whole lines


def scrape(url: str, name: str) -> float | None:
    """Sum of the samples of metric `name` on a Prometheus text page; None when unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    total = 0.0
    for row in text.splitlines():
        if row.startswith(name) and row[len(name)] in " {":
            total += float(row.split()[-1])
    return total


class Follower:
    """One tailer process following `log`, and how to read its lines-read counter."""

    def __init__(self, name: str, cmd: list[str], url: str, metric: str, log: Path) -> None:
        self.name, self.url, self.metric = name, url, metric
        # A file, not a pipe: mtail logs every read, and an unread pipe would stall it.
        self.stderr = log.with_name(f"{name}.stderr")
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)

    def count(self) -> float | None:
        return scrape(self.url, self.metric)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_followers(log: Path, mtail: str | None) -> list[Follower]:
    port = free_port()
    followers = [
        Follower(
            "specserve-exporter",
            [*EXPORTER, "--source", "file", "--file", str(log),
             "--listen-address", f"127.0.0.1:{port}"],
            f"http://127.0.0.1:{port}/metrics",
            names.LOG_LINES_READ.total,
            log,
        )
    ]
    if mtail:
        mport = free_port()
        followers.append(
            Follower(
                "mtail",
                [mtail, "--progs", str(ROOT / "benchmarks" / "mtail"), "--logs", str(log),
                 "--address", "127.0.0.1", "--port", str(mport)],
                f"http://127.0.0.1:{mport}/metrics",
                "sglang_log_lines_read_total",
                log,
            )
        )
    return followers


def wait_ready(followers: list[Follower], log: Path) -> None:
    """Both answer and follow the file: a probe line written once they answer must show up
    in both (each starts at the end of the file, so a probe written earlier is skipped)."""
    deadline = time.time() + 20
    next_probe = 0.0
    while time.time() < deadline:
        counts = [f.count() for f in followers]
        if all((c or 0) >= 1 for c in counts):
            time.sleep(0.5)  # a probe still in flight lands before the baseline is taken
            return
        if all(c is not None for c in counts) and time.time() >= next_probe:
            with log.open("ab") as out:
                out.write(b"[2026-02-23 17:00:00] INFO probe\n")
            next_probe = time.time() + 1
        for f in followers:
            if f.proc.poll() is not None:
                raise SystemExit(f"{f.name} exited: {f.stderr.read_text()[-2000:]}")
        time.sleep(0.1)
    raise SystemExit("a follower did not pick up the probe line within 20 s")


def wait_still(followers: list[Follower], quiet: float = 1.5, limit: float = 20) -> list[float]:
    """Counts once none has changed for `quiet` seconds."""
    deadline = time.time() + limit
    last: list[float | None] = [None] * len(followers)
    still_since = time.time()
    while time.time() < deadline:
        now = [f.count() for f in followers]
        if now != last:
            last, still_since = now, time.time()
        elif time.time() - still_since >= quiet:
            break
        time.sleep(0.2)
    return [c or 0.0 for c in last]


def copy_for_rotation(log: Path, keep: int) -> None:
    """logrotate's copy step with `rotate keep`: .N -> .N+1 for the older copies, then .1."""
    for n in range(keep - 1, 0, -1):
        older = log.with_name(f"{log.name}.{n}")
        if older.exists():
            older.rename(log.with_name(f"{log.name}.{n + 1}"))
    shutil.copyfile(log, log.with_name(f"{log.name}.1"))


def write_with_copytruncate(
    log: Path, lines: list[bytes], rate: float, every: int, keep: int
) -> int:
    """Append `lines` at `rate` lines/s through one O_APPEND descriptor, copytruncating every
    `every` lines and keeping `keep` copies; returns the number of rotations."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    rotations = 0
    start = time.perf_counter()
    try:
        for i in range(0, len(lines), BATCH):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            os.write(fd, b"".join(lines[i : i + BATCH]))
            written = i + BATCH
            if written % every == 0 and written < len(lines):
                copy_for_rotation(log, keep)
                os.truncate(log, 0)
                rotations += 1
    finally:
        os.close(fd)
    return rotations


def one_run(
    workdir: Path, lines: list[bytes], rate: float, every: int, keep: int, mtail: str | None
) -> dict[str, float]:
    log = workdir / "sglang.log"
    for stale in workdir.glob("sglang.log*"):
        stale.unlink()
    log.touch()
    followers = start_followers(log, mtail)
    try:
        wait_ready(followers, log)
        base = [f.count() or 0.0 for f in followers]
        write_with_copytruncate(log, lines, rate, every, keep)
        final = wait_still(followers)
    finally:
        for f in followers:
            f.stop()
    return {f.name: len(lines) - (c - b) for f, c, b in zip(followers, final, base, strict=True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=40_000)
    parser.add_argument("--every", type=int, nargs="+", default=[2_000, 5_000, 20_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=int, nargs="+", default=[1, 5],
                        help="copies logrotate keeps (rotate K); each K is a separate table")
    args = parser.parse_args()
    for every in args.every:
        if every % BATCH:
            raise SystemExit(f"--every {every}: must be a multiple of {BATCH}")
    mtail = shutil.which("mtail")
    lines = [line.encode() for line in sglang_log.lines(args.lines, seed=5)]
    seconds = args.lines / args.rate
    print(f"{args.lines:,} lines at {args.rate:,.0f} lines/s ({seconds:.1f} s per run), "
          f"copytruncate every N lines; lines lost = written - counted, median of {args.repeat}")
    lost: dict[tuple[int, int], dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for keep in args.keep:
                for every in args.every:  # round-robin: a slow spell of the machine hits all
                    run = one_run(Path(tmp), lines, args.rate, every, keep, mtail)
                    for name, n in run.items():
                        lost.setdefault((keep, every), {}).setdefault(name, []).append(n)
    names = list(next(iter(lost.values())))

    def cell(v: list[float]) -> str:
        n = statistics.median(v)
        return f"{n:,.0f} ({100 * n / args.lines:.1f}%)"

    print(f"\n{'copies kept':>12}{'N (lines/rotation)':>20}{'rotations':>11}"
          + "".join(f"{name + ' lost':>26}" for name in names))
    for (keep, every), by_name in lost.items():
        rotations = (args.lines - 1) // every
        cells = "".join(f"{cell(v):>26}" for v in by_name.values())
        print(f"{keep:>12}{every:>20,}{rotations:>11}{cells}")
    print("\nall runs (lines lost):")
    for (keep, every), by_name in lost.items():
        for name, v in by_name.items():
            print(f"  keep={keep} N={every:<7} {name:<20} {', '.join(f'{n:,.0f}' for n in v)}")
    if not mtail:
        print("mtail not installed: apt-get install mtail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
