"""baseline.yml and tune.yml end to end against the stand-in on the real Docker engine.

The stand-in's throughput follows a documented model (docs/standin.md), so the ranking the
tuning run must find is computed here from that model, not written down.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.standin.behaviour import SpecShape, model_throughput

from .conftest import Deployment
from .harness import BIN, FIXTURES, ROOT, Run, docker_inspect, http_get, http_status, write_profile

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CONCURRENCY = 8
# Model time is what the exporter reports, so the time scale only makes the test fast.
FAST = {"SPECSERVE_STANDIN_LOAD_SECONDS": "0.5", "SPECSERVE_STANDIN_WARMUP_SECONDS": "0.3",
        "SPECSERVE_STANDIN_TIME_SCALE": "0.05"}
GRID = {"num_steps": [1, 3], "eagle_topk": [1], "num_draft_tokens": [2, 4]}
# Passes `specserve check` (top-k 2 allows any draft count) but SGLang, and the stand-in, refuse
# a single draft token at start: the server crashes during the health gate.
CRASHING = {"num_steps": 1, "eagle_topk": 2, "num_draft_tokens": 1}


def _playbook(dep: Deployment, name: str, extra: Path, *args: str, timeout: int = 300) -> Run:
    start = time.monotonic()
    proc = subprocess.run(_argv(dep, name, extra, *args), cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    return Run(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)


def _argv(dep: Deployment, name: str, extra: Path, *args: str) -> list[str]:
    return [str(BIN / "ansible-playbook"), f"playbooks/{name}.yml", "-i", str(dep.inventory),
            "--vault-password-file", str(FIXTURES / "vault-password.txt"),
            "-e", f"@{FIXTURES / 'vault.yml'}", "-e", f"@{extra}", *args]


def _env() -> dict[str, str]:
    return dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", PYTHONUNBUFFERED="1")


@pytest.fixture(scope="module")
def tuning(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A profile of its own (tune.yml writes into it) beside the deployment's, fast stand-in
    settings, and the run directory; deployed through deploy.yml first."""
    work = tmp_path_factory.mktemp("tune")
    profile = deployment.workdir / "profiles" / "tune.yaml"
    write_profile(profile, deployment.server_port, **{"logging.decode_log_interval": 10})
    extra = work / "vars.yml"
    extra.write_text(yaml.safe_dump({
        "specserve_profile": str(profile),
        "server_env": FAST,
        "tune_runs_dir": str(work / "runs"),
        "tune_baseline_concurrency": [1, CONCURRENCY],
        "tune_bench_max_tokens": 96,
        "tune_bench_requests_per_level": 16,
        "tune_concurrency": CONCURRENCY,
        "tune_grid": GRID,
        "tune_points": [CRASHING],
        "tune_apply_best": True,
        "verify_warmup_requests": 1,
        "verify_warmup_max_tokens": 120,
    }))
    run = _playbook(deployment, "deploy", extra, "--skip-tags", "monitoring")
    assert run.rc == 0, run.output[-6000:]
    return {"profile": profile, "extra": extra, "runs": work / "runs"}


def _profile(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _assert_verified_server(dep: Deployment, steps: int, draft: int) -> None:
    info = docker_inspect(dep.prefix)
    assert info is not None and info["State"]["Running"]
    good = (dep.state_dir / "last-good" / "spec-hash").read_text().strip()
    assert info["Config"]["Labels"]["io.specserve.spec-hash"] == good
    assert http_status(f"http://127.0.0.1:{dep.server_port}/health_generate") == 200
    served = json.loads(http_get(f"http://127.0.0.1:{dep.server_port}/server_info",
                                 {"Authorization": "Bearer sk-test-4f1c2a9e7b"}))
    assert served["speculative_algorithm"] == "EAGLE3"
    assert (served["speculative_num_steps"], served["speculative_num_draft_tokens"]) == (
        steps, draft)


def test_baseline_is_measured_recorded_and_published(deployment: Deployment,
                                                     tuning: dict[str, Any]) -> None:
    run = _playbook(deployment, "baseline", tuning["extra"])
    assert run.rc == 0, run.output[-8000:]
    # The baseline server ran without speculation and passed the gate without accept length.
    assert "accept length n/a (no speculation)" in run.output
    recorded = _profile(tuning["profile"])["baseline"]
    assert "specserve bench" in recorded["source"]
    values = {k: float(v) for k, v in recorded["gen_throughput_tok_s"].items()}
    assert set(values) == {"1", "8"}
    # Server-side numbers are model time: close to the documented model (decode-log windows
    # also hold prefill steps and requests joining or leaving).
    assert values["1"] == pytest.approx(model_throughput(None, 1, 0.6), rel=0.12)
    assert values["8"] == pytest.approx(model_throughput(None, 8, 0.6), rel=0.2)
    # The exporter publishes exactly what the profile records.
    metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    for bucket, value in values.items():
        line = ("specserve_baseline_gen_throughput_tokens_per_second"
                f'{{concurrency="{bucket}"}} {value}')
        assert line in metrics, line
    # The speculative server is back (profile 3/1/4), verified.
    _assert_verified_server(deployment, 3, 4)
    assert not any(tuning["profile"].parent.glob(".*specserve-tune*"))


def _state(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "state.json").read_text())


def _expected_order() -> list[str]:
    speed = {f"s{s}-k1-d{s + 1}": model_throughput(SpecShape(s, 1, s + 1), CONCURRENCY, 0.6)
             for s in (1, 3)}
    return sorted(speed, key=lambda k: -speed[k])


def test_interrupted_tune_resumes_ranks_skips_and_applies_best(deployment: Deployment,
                                                               tuning: dict[str, Any]) -> None:
    # First run: killed as soon as the first point is finished.
    proc = subprocess.Popen(_argv(deployment, "tune", tuning["extra"]), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    run_dir: Path | None = None
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = [d for d in tuning["runs"].glob("localhost/run-*")
                    if (d / "state.json").exists()]
            if dirs:
                run_dir = dirs[0]
                if any(p["status"] == "ok" for p in _state(run_dir)["points"].values()):
                    break
            time.sleep(0.3)
    finally:
        ended_alone = proc.poll() is not None
        if not ended_alone:
            os.killpg(proc.pid, signal.SIGKILL)
        first_output = proc.communicate(timeout=30)[0]
    assert not ended_alone, f"the first tune run ended by itself:\n{first_output[-6000:]}"
    assert run_dir is not None, first_output[-6000:]
    state = _state(run_dir)["points"]
    done = sorted(k for k, p in state.items() if p["status"] == "ok")
    assert done == ["s1-k1-d2"], first_output[-6000:]
    assert state["s1-k1-d4"]["status"] == state["s3-k1-d2"]["status"] == "invalid"
    assert "with eagle_topk 1 the draft is a chain" in state["s1-k1-d4"]["reason"]

    # Second run: resumes with the points not finished, skips the crashing one, applies the best.
    run = _playbook(deployment, "tune", tuning["extra"])
    assert run.rc == 0, run.output[-8000:]
    assert "finished earlier: s1-k1-d2" in run.output
    deploying = "Point | deploy it (checked, health-gated, verified): "
    assert deploying + "s1-k1-d2" not in run.output
    for ident in ("s3-k1-d4", "s1-k2-d1"):
        assert deploying + ident in run.output
    assert deploying + "s1-k1-d4" not in run.output  # invalid: never run
    report = json.loads((run_dir / "report.json").read_text())
    assert [r["id"] for r in report["ranked"]] == _expected_order()
    assert report["best"]["id"] == "s1-k1-d2"
    base = _profile(tuning["profile"])["baseline"]["gen_throughput_tok_s"]["8"]
    for row in report["ranked"]:
        assert row["speedup"] == pytest.approx(row["server_gen_tok_s"] / base, rel=1e-3)
    failed = {r["id"]: r["reason"] for r in report["failed"]}
    assert set(failed) == {"s1-k2-d1"}
    assert "did not become healthy: crashed" in failed["s1-k2-d1"]
    assert {r["id"] for r in report["invalid"]} == {"s1-k1-d4", "s3-k1-d2"}
    markdown = (run_dir / "report.md").read_text()
    assert "**Best: `s1-k1-d2`**" in markdown and "stand-in" in markdown
    assert "`s1-k2-d1` |" in markdown
    assert (run_dir / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Applied: the profile carries the best point and the node runs it, verified.
    drafter = _profile(tuning["profile"])["drafter"]
    assert (drafter["num_steps"], drafter["eagle_topk"], drafter["num_draft_tokens"]) == (1, 1, 2)
    assert "Applied the best point s1-k1-d2" in run.output
    _assert_verified_server(deployment, 1, 2)
    metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    assert "specserve_speculative_draft_tokens 2.0" in metrics
    assert not any(tuning["profile"].parent.glob(".*specserve-tune*"))


@pytest.mark.parametrize("play", ["baseline", "tune"])
def test_baseline_and_tune_wait_for_the_deploy_lock(deployment: Deployment, tuning: dict[str, Any],
                                                    play: str) -> None:
    """baseline.yml and tune.yml restart the server too: they take deploy.yml's lock, so a
    deploy in progress (a holder on another controller, not stale) stops them before anything."""
    before = docker_inspect(deployment.prefix)
    assert before is not None
    lock = deployment.state_dir / "deploy.lock"
    lock.write_text(json.dumps({
        "token": "held-by-test", "user": "ops", "controller": "elsewhere", "pid": 4242,
        "pid_start": "1", "play": "Deploy specserve", "node": "localhost",
        "since": "2026-12-01T00:00:00+00:00", "since_epoch": time.time()}))
    try:
        run = _playbook(deployment, play, tuning["extra"], "-e", "server_lock_wait_s=0")
    finally:
        held = json.loads(lock.read_text())["token"] if lock.exists() else None
        lock.unlink(missing_ok=True)
    assert run.rc != 0
    said = run.output
    assert "Another deploy is running on localhost: the deploy lock" in said, said[-4000:]
    assert "ops@elsewhere pid 4242 (play 'Deploy specserve'" in run.output
    assert held == "held-by-test"  # neither taken over nor released by the refused play
    assert "Replacing" not in run.output and "Baseline |" not in run.output
    after = docker_inspect(deployment.prefix)
    assert after is not None and after["Id"] == before["Id"]
