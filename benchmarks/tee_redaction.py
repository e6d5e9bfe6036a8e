"""The launcher's log tee with secret redaction on against the same tee without secrets.

    .venv/bin/python -m benchmarks.tee_redaction [--mb 100] [--rounds 2] [--json FILE]

A writer process (the server) pushes `--mb` MB of SGLang-style log lines into a pipe as fast as
it can; this process runs the real tee (`specserve.profile.logtee.copy_stream`: stdout copy to
/dev/null, size-rotated file in a temp dir) on the other end. One line in 100 carries the
write time (CLOCK_MONOTONIC, shared by both processes); a handler added after the file handler
records when that line is in the file. One line in 1000 is SGLang's `server_args={...}` line
with the API key, so the redacting tee has real work. Plain and redacting runs alternate,
`--rounds` each, in one invocation; the figures are the medians:

- throughput ratio: redacting MB/s / plain MB/s (target >= 0.8)
- added p99 latency: p99 of a stamped line's way to the file, redacting minus plain (<= 50 ms)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specserve.profile import logtee
from specserve.secrets import MARKER

KEY = "sk-bench-9f8e7d6c5b4a39281706"
HF_TOKEN = "hf_benchTokenAbCdEfGhIjKlMnOpQrSt"
GRAFANA = "grafana-bench-pw-31337"
SECRETS = (KEY, HF_TOKEN, GRAFANA)
STAMP_EVERY, SECRET_EVERY, BATCH = 100, 1000, 100

WRITER = r"""
import os, sys, time
total, key = int(sys.argv[1]), sys.argv[2]
stamp_every, secret_every, batch = map(int, sys.argv[3:])
decode = (b"[2026-12-01 08:00:00 TP0] Decode batch, #running-req: 8, #token: 12345, token usage: "
          b"0.05, accept len: 2.31, accept rate: 0.44, cuda graph: True, gen throughput "
          b"(token/s): 512.30, #queue-req: 0\n")
args = ("[2026-12-01 08:00:00] server_args={'model_path': '/models/Kimi-K2.5', 'api_key': %r, "
        "'port': 8000}\n" % key).encode()
written, n = 0, 0
while written < total:
    parts = []
    for i in range(batch):
        if n % stamp_every == 0:
            parts.append(b"T%d " % time.monotonic_ns() + decode)
        elif n % secret_every == 1:
            parts.append(args)
        else:
            parts.append(decode)
        n += 1
    block = b"".join(parts)
    view = memoryview(block)
    while view:
        view = view[os.write(1, view):]
    written += len(block)
"""


class Arrival(logging.Handler):
    """Called right after the rotating file handler: the line is in the file (page cache)."""

    def __init__(self) -> None:
        super().__init__()
        self.latencies_ms: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.msg
        if isinstance(message, str) and message.startswith("T"):
            stamp = message[1 : message.index(" ")]
            self.latencies_ms.append((time.monotonic_ns() - int(stamp)) / 1e6)


def one_run(total: int, secrets: tuple[str, ...], workdir: Path) -> dict[str, Any]:
    arrival = Arrival()
    original = logtee._file_logger

    def with_probe(path: Path, max_bytes: int, backup_count: int) -> logging.Logger:
        logger = original(path, max_bytes, backup_count)
        logger.addHandler(arrival)
        return logger

    log = workdir / "sglang.log"
    for old in workdir.glob("sglang.log*"):
        old.unlink()
    logtee._file_logger = with_probe  # type: ignore[assignment]
    argv = [sys.executable, "-c", WRITER, str(total), KEY,
            str(STAMP_EVERY), str(SECRET_EVERY), str(BATCH)]  # fmt: skip
    try:
        with open(os.devnull, "wb") as sink:
            start = time.perf_counter()
            writer = subprocess.Popen(argv, stdout=subprocess.PIPE)
            assert writer.stdout is not None
            # 100 MiB per generation, 5 generations: the product's defaults (profile logging).
            logtee.copy_stream(writer.stdout, sink, log, 100 * 1024 * 1024, 5, secrets)
            seconds = time.perf_counter() - start
            writer.wait()
    finally:
        logtee._file_logger = original  # type: ignore[assignment]
    files = sorted(workdir.glob("sglang.log*"))
    size = sum(f.stat().st_size for f in files)
    key_hits = marker_hits = 0
    for f in files:
        data = f.read_bytes()
        key_hits += data.count(KEY.encode())
        marker_hits += data.count(MARKER.encode())
    lat = sorted(arrival.latencies_ms)
    return {
        "redacting": bool(secrets),
        "seconds": seconds,
        "mb_per_s": size / 1e6 / seconds,
        "file_bytes": size,
        "lines_timed": len(lat),
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[int(0.99 * (len(lat) - 1))],
        "key_hits": key_hits,
        "marker_hits": marker_hits,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="MB of log per run (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each mode (default 2)")
    parser.add_argument("--json", type=Path, help="also write the runs and summary here")
    args = parser.parse_args(argv)
    total = args.mb * 1_000_000
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tee-bench-") as tmp:
        for round_ in range(args.rounds):
            for secrets in ((), SECRETS):
                run = one_run(total, secrets, Path(tmp))
                runs.append(run)
                mode = "redacting" if secrets else "plain    "
                print(f"round {round_ + 1} {mode}: {run['mb_per_s']:6.1f} MB/s, "
                      f"{run['seconds']:5.1f} s, p50 {run['p50_ms']:6.2f} ms, "
                      f"p99 {run['p99_ms']:6.2f} ms ({run['lines_timed']} lines timed), "
                      f"key in file {run['key_hits']}x, marker {run['marker_hits']}x",
                      flush=True)  # fmt: skip
    plain = [r for r in runs if not r["redacting"]]
    red = [r for r in runs if r["redacting"]]

    def med(rs: list[dict[str, Any]], key: str) -> float:
        return float(statistics.median(r[key] for r in rs))

    summary = {
        "mb_per_run": args.mb,
        "rounds": args.rounds,
        "plain_mb_per_s": med(plain, "mb_per_s"),
        "redacting_mb_per_s": med(red, "mb_per_s"),
        "throughput_ratio": med(red, "mb_per_s") / med(plain, "mb_per_s"),
        "plain_p99_ms": med(plain, "p99_ms"),
        "redacting_p99_ms": med(red, "p99_ms"),
        "added_p99_ms": med(red, "p99_ms") - med(plain, "p99_ms"),
        "key_leaked": sum(r["key_hits"] for r in red),
    }
    print(
        f"\nthroughput: plain {summary['plain_mb_per_s']:.1f} MB/s, redacting "
        f"{summary['redacting_mb_per_s']:.1f} MB/s: ratio {summary['throughput_ratio']:.2f}x "
        f"(target >= 0.80)\np99 line latency to the file: plain {summary['plain_p99_ms']:.2f} "
        f"ms, redacting {summary['redacting_p99_ms']:.2f} ms: added "
        f"{summary['added_p99_ms']:+.2f} ms (target <= 50 ms)\nkey in the redacting runs' "
        f"files: {summary['key_leaked']}"
    )
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2) + "\n")
    ok = summary["key_leaked"] == 0 and all(r["key_hits"] > 0 for r in plain)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
