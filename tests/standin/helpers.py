"""Run real stand-in server processes on loopback, bounded in time; the log-line regexes."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

# The plain Decode/Prefill shapes the stand-in prints (test_log_corpus.py checks them against
# lines printed by SGLang's own report_decode_stats / report_prefill_stats).
PREFIX_RE = (
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d{3})?"
    r"(?P<ranks>(?: [A-Z_]+\d+)*)\] "
)
DECODE_RE = re.compile(
    PREFIX_RE + r"Decode batch, #running-req: (?P<running>\d+), #token: (?P<tokens>\d+), "
    r"token usage: (?P<usage>\d+\.\d{2}), "
    r"(?:accept len: (?P<accept_len>\d+\.\d{2}), accept rate: (?P<accept_rate>\d+\.\d{2}), "
    # DSPARK's, each only where SGLang prints it (test_block_drafters.py).
    r"(?:cap len: (?P<cap_len>\d+\.\d{2}), )?"
    r"(?:block accept len: (?P<block_accept_len>\d+\.\d{2}), )?"
    r"(?:est uncap acc len: \d+\.\d{2} \[\d+\.\d{2}, \d+\.\d{2}\], )?)?"
    r"(?P<graph_kind>cuda|cpu|npu|musa) graph: (?P<graph>True|False), "
    r"gen throughput \(token/s\): (?P<tput>\d+\.\d{2}), #queue-req: (?P<queue>\d+)$"
)
PREFILL_RE = re.compile(
    PREFIX_RE + r"Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, "
    r"token usage: \d+\.\d{2}, #running-req: \d+, #queue-req: \d+, #pending-token: \d+, "
    r"cuda graph: (?:True|False), input throughput \(token/s\): \d+\.\d{2}$"
)

FAST_ENV = {
    "SPECSERVE_STANDIN_LOAD_SECONDS": "0.3",
    "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.2",
    # 20x faster wall clock; printed numbers come from model time and do not change.
    "SPECSERVE_STANDIN_TIME_SCALE": "0.05",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Standin:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = f"http://127.0.0.1:{self.port}"

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()

    def decode_matches(self) -> list[re.Match[str]]:
        return [m for line in self.lines() if (m := DECODE_RE.match(line))]

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"stand-in exited {self.proc.returncode}: {self.lines()}")
            try:
                # /ready: "is it up", without /health's one-token generation and 1 s wait.
                if requests.get(self.url + "/ready", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"stand-in not ready in {timeout} s: {self.lines()[-5:]}")

    def wait_decode_lines(self, count: int, timeout: float = 10.0) -> list[re.Match[str]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.decode_matches()
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"fewer than {count} decode lines: {self.lines()[-8:]}")

    def chat(self, content: str, max_tokens: int = 64, **extra: object) -> dict:
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
        body.update(extra)
        r = requests.post(self.url + "/v1/chat/completions", json=body, timeout=30)
        r.raise_for_status()
        return r.json()

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise


def make_drafter(root: Path, architecture: str) -> Path:
    path = root / f"drafter-{architecture}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(f'{{"architectures": ["{architecture}"]}}')
    return path


# -- talking to a running stand-in --------------------------------------------------------------


def generate(url: str, n: int = 4, tokens: int = 60) -> None:
    """`n` generations of exactly `tokens` tokens each (ignore_eos), each answered 200."""
    for i in range(n):
        reply = requests.post(
            url + "/generate", timeout=60,
            json={"text": f"prompt {i}",
                  "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}},
        )  # fmt: skip
        assert reply.status_code == 200, reply.text
        assert len(reply.json()["text"].split()) == tokens


def gauge(url: str, name: str) -> float:
    """The value of the native series `name` the stand-in serves at /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{name} not served")


def standin_resolution(argv: list[str], version: str) -> dict[str, Any]:
    """The stand-in's resolution of `argv` for SGLang `version`, in the terms the resolution
    parity tests compare with SGLang's: ok / error, algorithm, draft path, tree, cap, warnings."""
    from specserve.standin.args import ResolutionError, parse_args

    try:
        args = parse_args(argv, version)
    except ResolutionError as exc:
        return {"ok": False, "error": str(exc)}
    assert args.spec is not None
    return {
        "ok": True,
        "algorithm": args.spec.algorithm,
        "draft": args.spec.draft_model_path,
        "tree": (args.spec.num_steps, args.spec.eagle_topk, args.spec.num_draft_tokens),
        "max_running_requests": args.max_running_requests,
        "warnings": args.warnings,
    }
