"""The stand-in over two nodes behaves per rank as SGLang does (specserve/standin/ranks.py).

Real stand-in processes on loopback: rank 0 serves the API only once rank 1 joined its
rendezvous; rank 1 serves only the dummy health server (/ping, /health, /health_generate 200,
nothing else); a rank that cannot form its group fails; a lost rank takes the other down (exit
1); an orderly stop of rank 0 stops rank 1 cleanly (exit 0); and specserve-launch runs each rank
of one multi-node profile from --node-rank.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests
import yaml

from tests.standin.helpers import FAST_ENV, Standin, free_port

ROOT = Path(__file__).resolve().parents[2]

Start = Callable[..., Standin]


def _flags(rank: int, rendezvous: int, timeout: int = 30) -> tuple[str, ...]:
    return (
        "--tp-size", "2", "--nnodes", "2", "--node-rank", str(rank),
        "--dist-init-addr", f"127.0.0.1:{rendezvous}", "--dist-timeout", str(timeout),
        "--enable-metrics",
    )  # fmt: skip


def _wait_http(url: str, timeout: float = 20.0) -> requests.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return requests.get(url, timeout=2)
        except requests.ConnectionError:
            time.sleep(0.05)
    raise AssertionError(f"nothing answered {url} in {timeout} s")


def _wait_exit(server: Standin, timeout: float = 20.0) -> int:
    server.proc.wait(timeout=timeout)
    return int(server.proc.returncode)


def test_rank0_waits_for_the_group_then_serves_rank1_only_health(start_standin: Start) -> None:
    rendezvous = free_port()
    rank0 = start_standin(*_flags(0, rendezvous), wait=False)
    time.sleep(1.0)
    # The group is not formed: rank 0 has not loaded, its API port is closed.
    try:
        requests.get(rank0.url + "/ready", timeout=1)
        raise AssertionError("rank 0 serves before its group formed")
    except requests.ConnectionError:
        pass
    rank1 = start_standin(*_flags(1, rendezvous), wait=False)
    rank0.wait_ready(timeout=20)
    assert rank0.chat("hello", max_tokens=8)["choices"]
    assert _wait_http(rank1.url + "/health_generate").status_code == 200
    for path in ("/ping", "/health"):
        assert requests.get(rank1.url + path, timeout=2).status_code == 200
    assert requests.get(rank1.url + "/metrics", timeout=2).status_code == 200
    # No API on a rank > 0: SGLang runs no tokenizer there.
    for path in ("/ready", "/v1/models", "/server_info"):
        assert requests.get(rank1.url + path, timeout=2).status_code == 404, path
    assert any("Dummy health check server started" in line for line in rank1.lines())
    # Rank 0's orderly stop stops the group: rank 1 exits 0 with it.
    assert rank0.stop() == 0
    assert _wait_exit(rank1) == 0, rank1.lines()[-5:]


def test_a_lost_rank_takes_the_group_down(start_standin: Start) -> None:
    rendezvous = free_port()
    rank0 = start_standin(*_flags(0, rendezvous), wait=False)
    rank1 = start_standin(*_flags(1, rendezvous), wait=False)
    rank0.wait_ready(timeout=20)
    _wait_http(rank1.url + "/ping")
    rank1.proc.kill()
    assert _wait_exit(rank0) == 1
    assert any("lost rank 1" in line for line in rank0.lines()), rank0.lines()[-5:]


def test_a_rank_that_cannot_form_its_group_fails(start_standin: Start) -> None:
    lonely = start_standin(*_flags(1, free_port(), timeout=2), wait=False)
    assert _wait_exit(lonely) == 1
    assert any("could not reach rank 0's rendezvous" in line for line in lonely.lines())
    alone = start_standin(*_flags(0, free_port(), timeout=2), wait=False)
    assert _wait_exit(alone) == 1
    assert any("0 came within --dist-timeout" in line for line in alone.lines())


def test_the_launcher_runs_each_rank_of_a_multinode_profile(tmp_path: Path) -> None:
    """The product path: one profile, specserve-launch --node-rank N per rank, the stand-in
    behind it. On one loopback host the ranks need their own ports (on real nodes the same
    server.port serves on each), so each rank's copy differs in server.port alone."""
    bindir = Path(sys.executable).parent
    source = ROOT / "tests" / "fixtures" / "profiles" / "multinode-standin-2rank.yaml"
    rendezvous, ports = free_port(), (free_port(), free_port())
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        for rank, port in enumerate(ports):
            doc = yaml.safe_load(source.read_text(encoding="utf-8"))
            for section in ("target", "drafter"):
                doc[section]["path"] = str((source.parent / doc[section]["path"]).resolve())
            doc["server"]["port"] = port
            doc["nodes"]["rendezvous_port"] = rendezvous
            doc["logging"] = {"file": str(tmp_path / f"rank{rank}" / "sglang.log")}
            doc["env"] = dict(FAST_ENV)
            profile = tmp_path / f"rank{rank}.yaml"
            profile.write_text(yaml.safe_dump(doc), encoding="utf-8")
            log = tmp_path / f"rank{rank}.out"
            logs.append(log)
            with log.open("wb") as sink:
                procs.append(subprocess.Popen(
                    [str(bindir / "specserve-launch"), "--node-rank", str(rank), str(profile)],
                    stdout=sink, stderr=subprocess.STDOUT,
                    env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"},
                ))  # fmt: skip
        rank0 = f"http://127.0.0.1:{ports[0]}"
        assert _wait_http(rank0 + "/health_generate", timeout=30).status_code in (200, 503)
        deadline = time.monotonic() + 30
        while requests.get(rank0 + "/health_generate", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, logs[0].read_text()[-2000:]
            time.sleep(0.2)
        assert requests.get(rank0 + "/v1/models", timeout=5).status_code == 200
        rank1 = f"http://127.0.0.1:{ports[1]}"
        assert _wait_http(rank1 + "/health_generate").status_code == 200
        assert requests.get(rank1 + "/v1/models", timeout=5).status_code == 404
        launched = logs[1].read_text(encoding="utf-8")
        assert "--nnodes 2" in launched and "--node-rank 1" in launched
        assert f"--dist-init-addr 127.0.0.1:{rendezvous}" in launched
        procs[0].send_signal(signal.SIGTERM)
        assert procs[0].wait(timeout=30) == 0
        assert procs[1].wait(timeout=30) == 0, logs[1].read_text()[-2000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
