"""Generate SGLang-like logs for benchmarks: the current decode/prefill format, TP0 prefix.

#running-req moves as a random walk, as it does on a real server (requests arrive and finish a
few at a time), and values are printed the way SGLang prints them (two decimals).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

HTTP = '[{t}] INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
DECODE = (
    "[{t} TP0] Decode batch, #running-req: {run}, #token: {tok}, token usage: {usage:.2f}, "
    "accept len: {acc:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
    "gen throughput (token/s): {tput:.2f}, #queue-req: {queue}\n"
)
PREFILL = (
    "[{t} TP0] Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: {cached}, "
    "token usage: {usage:.2f}, #running-req: {run}, #queue-req: {queue}\n"
)


def lines(count: int, seed: int = 1) -> Iterator[str]:
    """80% decode, 10% prefill, 10% HTTP access lines."""
    rng = random.Random(seed)
    running = 1
    for i in range(count):
        second = i // 50
        t = f"2026-02-23 {17 + second // 3600 % 6:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        r = rng.random()
        if r < 0.8:
            if rng.random() < 0.05:
                running = max(1, min(64, running + rng.choice((-1, 1))))
            acc = 1.0 + 2.5 * rng.random()
            yield DECODE.format(
                t=t, run=running, tok=rng.randint(100, 90000), usage=rng.random(), acc=acc,
                rate=(acc - 1) / 3, tput=60.0 * running * (0.8 + 0.4 * rng.random()),
                queue=rng.randint(0, 2),
            )
        elif r < 0.9:
            yield PREFILL.format(
                t=t, new=rng.randint(1, 4000), cached=rng.randint(0, 4000), usage=rng.random(),
                run=running, queue=0,
            )
        else:
            yield HTTP.format(t=t, port=rng.randint(30000, 60000))


def write(path: Path, count: int, seed: int = 1) -> Path:
    with path.open("w") as out:
        batch: list[str] = []
        for line in lines(count, seed):
            batch.append(line)
            if len(batch) == 10000:
                out.writelines(batch)
                batch.clear()
        out.writelines(batch)
    return path
