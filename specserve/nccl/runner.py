"""Run one preset: start one worker process per rank in a clean environment, collect reports.

Fresh processes per preset because NCCL reads its variables once, at communicator init. Inherited
NCCL_* variables are stripped so `default` really is NCCL's default, and the preset's variables
are laid on top. A failing or hanging preset is reported, never fatal to the whole run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# worker.py imports only torch and the stdlib, so any interpreter with torch can run it by path,
# without specserve installed there (the SGLang image's python3). runpy rather than
# `python worker.py`, which would put this package's directory first on sys.path, where names
# like cli.py or stats.py could shadow modules that torch imports.
WORKER = Path(__file__).with_name("worker.py")
_RUN_WORKER = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)

# After one rank dies the others block in a collective until NCCL's own timeout (minutes):
# give them this long to notice and exit, then stop them.
PEER_GRACE_S = 10.0
_POLL_S = 0.05


@dataclass
class RankProcess:
    rank: int
    popen: subprocess.Popen[bytes]
    out: Path
    log: Path


@dataclass
class PresetRun:
    status: str  # ok | failed | timeout
    reports: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def worker_env(
    base: Mapping[str, str],
    preset_env: Mapping[str, str],
    extra_env: Mapping[str, str],
    rank: int,
    world_size: int,
    port: int,
) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith("NCCL_")}
    env.update(extra_env)
    env.update(preset_env)
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
    )
    return env


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _stop(procs: list[RankProcess]) -> None:
    for proc in procs:
        if proc.popen.poll() is None:
            # Each worker leads its own session, so this reaches what it started (NCCL helpers).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
    for proc in procs:
        proc.popen.wait()


def _first_error(procs: list[RankProcess]) -> str:
    """The error of the rank that failed by itself; ranks we killed afterwards only echo it."""
    failed = [p for p in procs if p.popen.returncode not in (0, None)]
    failed.sort(key=lambda p: (p.popen.returncode < 0, p.rank))
    for proc in failed:
        try:
            report = json.loads(proc.out.read_text(encoding="utf-8"))
            message = str(report.get("error") or "")
        except (OSError, json.JSONDecodeError):
            message = ""
        detail = message or _tail(proc.log) or "no output"
        return f"rank {proc.rank} exited with status {proc.popen.returncode}: {detail}"
    return "a rank failed without reporting why"


def _wait(procs: list[RankProcess], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    grace_deadline: float | None = None
    while True:
        codes = [p.popen.poll() for p in procs]
        if all(c is not None for c in codes):
            return "ok" if all(c == 0 for c in codes) else "failed"
        now = time.monotonic()
        if any(c not in (None, 0) for c in codes) and grace_deadline is None:
            grace_deadline = now + PEER_GRACE_S
        if grace_deadline is not None and now >= grace_deadline:
            _stop(procs)
            return "failed"
        if now >= deadline:
            _stop(procs)
            return "timeout"
        time.sleep(_POLL_S)


def run_ranks(
    argv: list[str],
    envs: list[dict[str, str]],
    workdir: Path,
    timeout_s: float,
) -> tuple[str, list[RankProcess]]:
    """Start `argv` once per rank (argv's {out} replaced by the rank's report path) and wait."""
    procs: list[RankProcess] = []
    try:
        for rank, env in enumerate(envs):
            out = workdir / f"rank{rank}.json"
            log = workdir / f"rank{rank}.log"
            with log.open("wb") as log_file:
                popen = subprocess.Popen(
                    [a.replace("{out}", str(out)) for a in argv],
                    env=env,
                    # `-c` puts the working directory on sys.path: keep the user's out of it.
                    cwd=workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            procs.append(RankProcess(rank, popen, out, log))
        return _wait(procs, timeout_s), procs
    except BaseException:
        _stop(procs)
        raise


def run_preset(
    python: str,
    spec: dict[str, Any],
    preset_env: Mapping[str, str],
    extra_env: Mapping[str, str],
    world_size: int,
    timeout_s: float,
    base_env: Mapping[str, str] | None = None,
) -> PresetRun:
    with tempfile.TemporaryDirectory(prefix="specserve-nccl-") as tmp:
        workdir = Path(tmp)
        spec_path = workdir / "spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        port = free_port()
        base = os.environ if base_env is None else base_env
        envs = [
            worker_env(base, preset_env, extra_env, rank, world_size, port)
            for rank in range(world_size)
        ]
        argv = [python, "-c", _RUN_WORKER, str(WORKER), str(spec_path), "{out}"]
        status, procs = run_ranks(argv, envs, workdir, timeout_s)
        if status == "timeout":
            return PresetRun(
                "timeout",
                error=f"ranks did not finish within {timeout_s:g} s (raise --timeout)",
            )
        if status == "failed":
            return PresetRun("failed", error=_first_error(procs))
        reports = []
        for proc in procs:
            try:
                reports.append(json.loads(proc.out.read_text(encoding="utf-8")))
            except (OSError, json.JSONDecodeError) as exc:
                return PresetRun(
                    "failed",
                    error=f"rank {proc.rank} exited 0 but left no readable report: {exc}",
                )
        return PresetRun("ok", reports=reports)
