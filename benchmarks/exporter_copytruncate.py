"""Lines lost to logrotate's copytruncate with the writer, the rotator and the reader running at
once, as on a server: how many no tailer can see, and how many each tailer loses beyond those.

    python -m benchmarks.exporter_copytruncate [--lines 200000] [--rate 40000]
        [--interval 0.05 0.125 0.5 2] [--keep 1 5] [--repeat 3]

benchmarks/exporter_rotation.py rotates from the writer's own loop, so no line is written while
the copy is made. Here three processes run side by side: a writer appending SGLang-like lines
(benchmarks/sglang_log.py, each line once) through one O_APPEND descriptor at --rate lines/s;
a rotator doing what logrotate's copytruncate with `rotate K` does every --interval seconds
(drop .K, shift .1..K-1 up, copy the file into a new sglang.log.1, then ftruncate it through the
descriptor it copied from); and the tailers: specserve-exporter (`--source file`, 0.1 s poll),
mtail when installed (250 ms poll), and the same FileSource in this process, whose sink records
which lines it got (the exporter's counter cannot tell a line lost from one counted twice).

Every copy is also hard-linked into a directory no tailer looks at, so once the run is over the
lines that exist somewhere (a copy, or the file at the end) are known. A line in none of them
was written after the copy reached the end of the file and before the truncation: it was in the
live file only for that window, and a tailer gets it only by reading the live file within it
(never from a copy). Figures: lines lost = written - counted, median of --repeat runs;
"in no copy" is that window's count; the in-process reader's losses are split into lines that
a copy held (the reader's own loss) and lines in no copy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import sglang_log
from benchmarks.exporter_rotation import start_followers, wait_ready, wait_still
from specserve_exporter.sources.file import FileSource

BATCH = 20  # lines per write(): 2,000 writes/s at 40k lines/s, each whole lines
COPY_CHUNK = 64 * 1024


# --- the writer and the rotator, each its own process ------------------------------------


def run_writer(log: Path, lines_file: Path, rate: float) -> None:
    lines = lines_file.read_bytes().splitlines(keepends=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    start = time.perf_counter()
    for i in range(0, len(lines), BATCH):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        os.write(fd, b"".join(lines[i : i + BATCH]))
    os.close(fd)


def run_rotator(log: Path, archive: Path, interval: float, keep: int, stop: Path) -> None:
    """logrotate's copytruncate (its copyTruncate: read the file to its end into a new copy,
    then ftruncate the descriptor it read from) every `interval` s until `stop` exists. Prints
    one line per rotation: the seconds from the copy's end to the truncation."""
    generation = 0
    while not stop.exists():
        time.sleep(interval)
        (log.with_name(f"{log.name}.{keep}")).unlink(missing_ok=True)
        for n in range(keep - 1, 0, -1):
            older = log.with_name(f"{log.name}.{n}")
            if older.exists():
                older.rename(log.with_name(f"{log.name}.{n + 1}"))
        copy = log.with_name(f"{log.name}.1")
        src = os.open(log, os.O_RDWR)
        dst = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        while chunk := os.read(src, COPY_CHUNK):
            os.write(dst, chunk)
        os.close(dst)
        copied = time.perf_counter()
        os.ftruncate(src, 0)
        window = time.perf_counter() - copied
        os.close(src)
        os.link(copy, archive / f"gen-{generation:06d}")
        generation += 1
        print(f"{window:.6f}", flush=True)


# --- one run ------------------------------------------------------------------------------


@dataclass
class Recorder:
    """The in-process FileSource's sink: which written lines it got, and how often."""

    index: dict[bytes, int]
    seen: list[int] = field(default_factory=list)
    strangers: int = 0  # lines not written by the writer (the readiness probes), or cut

    def __call__(self, chunk: bytes) -> None:
        for line in chunk.splitlines(keepends=True):
            i = self.index.get(line)
            if i is None:
                self.strangers += 1
            else:
                self.seen.append(i)


@dataclass
class Run:
    rotations: int
    in_no_copy: int
    window_ms: float  # median copy-to-truncate time
    exporter_lost: float
    mtail_lost: float | None
    reader_lost_in_copy: int  # lost though a copy held them: the reader's own loss
    reader_lost_no_copy: int
    reader_twice: int


def lines_in(path: Path, index: dict[bytes, int]) -> set[int]:
    return {i for line in path.read_bytes().splitlines(keepends=True)
            if (i := index.get(line)) is not None}


def one_run(workdir: Path, lines_file: Path, index: dict[bytes, int], rate: float,
            interval: float, keep: int, mtail: str | None) -> Run:
    for stale in workdir.iterdir():
        if stale.is_file():
            stale.unlink()
    archive = workdir / "archive"
    if archive.exists():
        for old in archive.iterdir():
            old.unlink()
    archive.mkdir(exist_ok=True)
    log, stop = workdir / "sglang.log", workdir / "stop"
    log.touch()
    recorder = Recorder(index)
    reader = FileSource(log, recorder, poll_interval=0.1)
    reader_thread = threading.Thread(target=reader.run, daemon=True)
    reader_thread.start()
    followers = start_followers(log, mtail)
    me = [sys.executable, "-m", "benchmarks.exporter_copytruncate"]
    try:
        wait_ready(followers, log)
        base = [f.count() or 0.0 for f in followers]
        rotator = subprocess.Popen(
            [*me, "rotator", str(log), str(archive), str(interval), str(keep), str(stop)],
            stdout=subprocess.PIPE, text=True)
        subprocess.run([*me, "writer", str(log), str(lines_file), str(rate)], check=True)
        stop.touch()
        out, _ = rotator.communicate(timeout=60)
        final = wait_still(followers)
        wait_reader_still(recorder)
    finally:
        reader.stop()
        for f in followers:
            f.stop()
    reader_thread.join(timeout=5)
    windows = [float(row) for row in out.split()]
    somewhere = lines_in(log, index)
    for copy in archive.iterdir():
        somewhere |= lines_in(copy, index)
    written = len(index)
    seen = set(recorder.seen)
    lost = set(range(written)) - seen
    counted = {f.name: c - b for f, c, b in zip(followers, final, base, strict=True)}
    return Run(
        rotations=len(windows),
        in_no_copy=written - len(somewhere),
        window_ms=1000 * statistics.median(windows) if windows else 0.0,
        exporter_lost=written - counted["specserve-exporter"],
        mtail_lost=written - counted["mtail"] if "mtail" in counted else None,
        reader_lost_in_copy=len(lost & somewhere),
        reader_lost_no_copy=len(lost - somewhere),
        reader_twice=len(recorder.seen) - len(seen),
    )


def wait_reader_still(recorder: Recorder, quiet: float = 1.5, limit: float = 20) -> None:
    deadline = time.time() + limit
    last, since = -1, time.time()
    while time.time() < deadline:
        now = len(recorder.seen)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            return
        time.sleep(0.1)


def unique_lines(count: int) -> list[bytes]:
    """`count` SGLang-like lines, none twice (a repeated line could not be told apart)."""
    out: list[bytes] = []
    seen: set[bytes] = set()
    seed = 7
    while len(out) < count:
        for text in sglang_log.lines(count, seed=seed):
            line = text.encode()
            if line not in seen:
                seen.add(line)
                out.append(line)
                if len(out) == count:
                    break
        seed += 1
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "writer":
        run_writer(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "rotator":
        run_rotator(Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]),
                    int(sys.argv[5]), Path(sys.argv[6]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=40_000)
    parser.add_argument("--interval", type=float, nargs="+", default=[0.05, 0.125, 0.5, 2.0],
                        help="seconds between copytruncates")
    parser.add_argument("--keep", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from shutil import which

    mtail = which("mtail")
    lines = unique_lines(args.lines)
    index = {line: i for i, line in enumerate(lines)}
    runs: dict[tuple[int, float], list[Run]] = {}
    print(f"{args.lines:,} lines at {args.rate:,.0f} lines/s ({args.lines / args.rate:.1f} s "
          f"per run); writer, rotator and tailers run at once; median of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp) / "logs"
        workdir.mkdir()
        lines_file = Path(tmp) / "lines"
        lines_file.write_bytes(b"".join(lines))
        for _ in range(args.repeat):
            for keep in args.keep:
                for interval in args.interval:  # round-robin: a slow spell hits all settings
                    run = one_run(workdir, lines_file, index, args.rate, interval, keep, mtail)
                    runs.setdefault((keep, interval), []).append(run)

    def med(values: list[float]) -> str:
        n = statistics.median(values)
        return f"{n:,.0f} ({100 * n / args.lines:.2f}%)"

    header = (f"{'K':>3}{'every s':>9}{'rotations':>10}{'copy->trunc ms':>15}{'in no copy':>18}"
              f"{'exporter lost':>19}{'reader lost: in copy':>22}{'twice':>7}{'mtail lost':>19}")
    print("\n" + header)
    for (keep, interval), rs in runs.items():
        mtail_cell = (med([r.mtail_lost for r in rs if r.mtail_lost is not None])
                      if mtail else "-")
        print(f"{keep:>3}{interval:>9}{statistics.median([r.rotations for r in rs]):>10.0f}"
              f"{statistics.median([r.window_ms for r in rs]):>15.2f}"
              f"{med([r.in_no_copy for r in rs]):>18}{med([r.exporter_lost for r in rs]):>19}"
              f"{med([r.reader_lost_in_copy for r in rs]):>22}"
              f"{statistics.median([r.reader_twice for r in rs]):>7.0f}{mtail_cell:>19}")
    print("\nall runs (in no copy / exporter lost / reader lost in a copy, in no copy / mtail):")
    for (keep, interval), rs in runs.items():
        cells = "; ".join(
            f"{r.in_no_copy:,}/{r.exporter_lost:,.0f}/{r.reader_lost_in_copy:,},"
            f"{r.reader_lost_no_copy:,}/"
            + (f"{r.mtail_lost:,.0f}" if r.mtail_lost is not None else "-") for r in rs)
        print(f"  K={keep} every {interval} s: {cells}")
    if not mtail:
        print("mtail not installed: apt-get install mtail")
    return 0


if __name__ == "__main__":
    sys.exit(main())
