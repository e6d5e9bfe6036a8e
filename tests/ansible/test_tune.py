"""baseline.yml and tune.yml end to end against the stand-in on the real Docker engine.

The stand-in's throughput follows a documented model (docs/standin.md), so the ranking the
tuning run must find is computed here from that model, not written down.

Like for like (issue 18 item 2): the module's profile leaves max_running_requests unset, so
baseline.yml must start the non-speculative server with the cap the speculative one gets from
SGLang (48, the stand-in's resolution derived from the contract) and record it with the other
settings; the deploy then passes `specserve check` like for like, and a baseline recorded with
another running-request cap, image or TP is refused by deploy.yml's preflight with the message,
the serving container left as it was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring.rules import DECODE_LINE_RATE
from specserve.profile.likeness import SETTINGS, profile_settings
from specserve.profile.loader import load_profile
from specserve.standin import STANDIN_NAME
from specserve.standin.behaviour import SpecShape, model_throughput
from specserve.upstream import PINNED_VERSION
from tests.e2e.processes import Services, free_port, http_ok, wait_until
from tests.e2e.prom import Prometheus
from tests.e2e.stack import (
    EXPORTER_JOB,
    PROMETHEUS,
    WINDOW,
    missing_binaries,
    render_rules,
    write_overrides,
)

from .conftest import Deployment
from .harness import BIN, FIXTURES, ROOT, Run, docker_inspect, http_get, http_status, write_profile

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CONCURRENCY = 8
IMAGE = "specserve/standin:0.1.0"  # the stand-in inventory's specserve_image
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
    # SGLang's own cap acts: the profile does not write it (the like-for-like tests below).
    doc = _profile(profile)
    del doc["server"]["max_running_requests"]
    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
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
    # The shipped stand-in baseline records nothing: a warning, not a refusal.
    assert "records none of the settings it was measured with" in run.output
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


# The module's first test also deploys (the fixture), and pytest-timeout counts the setup.
@pytest.mark.timeout(900)
def test_baseline_is_measured_recorded_and_published(deployment: Deployment,
                                                     tuning: dict[str, Any]) -> None:
    # As the demo inventory does (tune_profile_out): the measured profile goes into a working
    # copy at the profile's depth (its ../tests model paths resolve), the profile is not written.
    profile = tuning["profile"]
    copy = profile.parent.parent / "build" / profile.name
    before = profile.read_text()
    run = _playbook(deployment, "baseline", tuning["extra"], "-e", f"tune_profile_out={copy}",
                    timeout=600)
    assert run.rc == 0, run.output[-8000:]
    assert profile.read_text() == before and not list(profile.parent.glob(f"{profile.name}.*~"))
    assert f"The baseline is recorded in {copy}, a working copy of {profile}" in run.output
    assert f"baseline recorded in {copy} and published by the exporter" in run.output
    assert f"-e specserve_profile={copy}" in run.output  # how to keep deploying it
    # The baseline server ran without speculation and passed the gate without accept length.
    assert "accept length n/a (no speculation)" in run.output
    doc = _profile(copy)
    recorded = doc["baseline"]
    assert "specserve bench" in recorded["source"]
    # What it was measured with (issue 18 item 2): the speculative run's cap, TP and image.
    # baseline-from refuses a run whose server reported another cap than the profile it ran,
    # so 48 is also what the non-speculative server itself said in /server_info.
    assert (recorded["max_running_requests"], recorded["tp"]) == (48, 1)
    assert "max_running_requests" not in doc["server"]  # the pin is the baseline variant's only
    assert "measured with max_running_requests 48" in run.output
    assert recorded["image"] == IMAGE
    # What the server reported in /server_info: the stand-in says it is one.
    assert recorded["sglang_version"] == f"{PINNED_VERSION}+{STANDIN_NAME}"
    assert recorded["target"] == doc["target"]["path"]
    assert (recorded["dp"], recorded["ep"]) == (1, 1)
    assert recorded["context_length"] is None and recorded["cuda_graph_max_bs"] is None
    assert recorded["disable_cuda_graph"] is False
    assert recorded["nccl_preset"] == "default"
    values = {k: float(v) for k, v in recorded["gen_throughput_tok_s"].items()}
    assert set(values) == {"1", "8"}
    # Server-side numbers are model time: near the documented model (decode-log windows also
    # hold prefill steps and requests joining or leaving). Never above it; below it when the
    # stand-in's one CPU-bound loop is starved (CI's 2 cores under 3 workers measured 0.79 of
    # the model at concurrency 8), so the floor is half: the concurrency-1 figure recorded for
    # concurrency 8 (the model gives 90 and 533) is still far outside.
    for bucket in ("1", "8"):
        model = model_throughput(None, int(bucket), 0.6)
        assert 0.5 * model <= values[bucket] <= 1.12 * model, (bucket, values[bucket], model)
    # The exporter publishes exactly what the profile records.
    metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    for bucket, value in values.items():
        line = ("specserve_baseline_gen_throughput_tokens_per_second"
                f'{{concurrency="{bucket}"}} {value}')
        assert line in metrics, line
    # The speculative server is back (profile 3/1/4), verified, running the copy.
    _assert_verified_server(deployment, 3, 4)
    assert not any(profile.parent.glob(".*specserve-tune*"))
    assert not any(copy.parent.glob(".*specserve-tune*"))
    # The module's profile takes the measurement from here on (the next tests read and tune it).
    profile.write_text(copy.read_text())
    # The speculative profile with that baseline deploys: check finds it like for like.
    again = _playbook(deployment, "deploy", tuning["extra"], "--skip-tags", "monitoring")
    assert again.rc == 0, again.output[-6000:]
    assert "the baseline was measured under other settings" not in again.output
    assert "records none of the settings" not in again.output


UNLIKE = {
    "max_running_requests": (
        32,
        "baseline.max_running_requests = 32 but server.max_running_requests (effective) = 48",
    ),
    "image": ("specserve/standin:0.0.9", "baseline.image = 'specserve/standin:0.0.9' but the "
              f"deploy's server image = '{IMAGE}'"),
    "tp": (2, "baseline.tp = 2 but parallelism.tp = 1"),
}


@pytest.mark.parametrize("setting", list(UNLIKE))
def test_a_deploy_with_an_unlike_baseline_is_refused_before_any_change(
        deployment: Deployment, tuning: dict[str, Any], setting: str) -> None:
    before = docker_inspect(deployment.prefix)
    assert before is not None and before["State"]["Running"]
    doc = _profile(tuning["profile"])
    assert "image" in doc["baseline"], "the baseline test records the settings first"
    value, said = UNLIKE[setting]
    doc["baseline"][setting] = value
    unlike = tuning["profile"].parent / f"unlike-{setting}.yaml"
    unlike.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        run = _playbook(deployment, "deploy", tuning["extra"], "--skip-tags", "monitoring",
                        "-e", f"specserve_profile={unlike}")
    finally:
        unlike.unlink()
    assert run.rc != 0
    assert "is refused by `specserve check`" in run.output, run.output[-6000:]
    assert said in run.output, run.output[-6000:]
    assert "re-run playbooks/baseline.yml" in run.output
    # Refused in preflight: the serving container is the same one, still healthy.
    after = docker_inspect(deployment.prefix)
    assert after is not None and after["Id"] == before["Id"] and after["State"]["Running"]
    assert http_status(f"http://127.0.0.1:{deployment.server_port}/health_generate") == 200


def _state(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "state.json").read_text())


def _expected_order() -> list[str]:
    speed = {f"s{s}-k1-d{s + 1}": model_throughput(SpecShape(s, 1, s + 1), CONCURRENCY, 0.6)
             for s in (1, 3)}
    return sorted(speed, key=lambda k: -speed[k])


# Five restarts and benchmarks in one test, on a machine shared by many test runs.
@pytest.mark.timeout(2400)
def test_interrupted_tune_resumes_ranks_skips_and_applies_best(deployment: Deployment,
                                                               tuning: dict[str, Any]) -> None:
    # First run: killed as soon as the first point is finished.
    proc = subprocess.Popen(_argv(deployment, "tune", tuning["extra"]), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    run_dir: Path | None = None
    deadline = time.monotonic() + 600
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
    # No speculation is the first candidate, and resumable like the others.
    assert done == ["no-spec"], first_output[-6000:]
    assert state["s1-k1-d4"]["status"] == state["s3-k1-d2"]["status"] == "invalid"
    assert "with eagle_topk 1 the draft is a chain" in state["s1-k1-d4"]["reason"]

    # Second run: resumes with the points not finished, skips the crashing one, applies the best.
    run = _playbook(deployment, "tune", tuning["extra"], timeout=1500)
    assert run.rc == 0, run.output[-8000:]
    assert "finished earlier: no-spec" in run.output
    deploying = "Point | deploy it (checked, health-gated, verified): "
    assert deploying + "no-spec" not in run.output
    for ident in ("s1-k1-d2", "s3-k1-d4", "s1-k2-d1"):
        assert deploying + ident in run.output
    assert deploying + "s1-k1-d4" not in run.output  # invalid: never run
    report = json.loads((run_dir / "report.json").read_text())
    # Speculation pays here (the model's acceptance 0.6 at concurrency 8): the best speculative
    # point beats no speculation, measured in the same sweep with the same running-request cap.
    # Ranked by what the sweep measured. The stand-in's model puts s1-k1-d2 12% ahead of
    # s3-k1-d4 (620 against 545 tok/s), and a loaded 2-core machine once measured them the other
    # way round (CI of 7f03ed6): the claim is the measured order, and the best applied.
    assert {r["id"] for r in report["ranked"] if r["speculative"]} == set(_expected_order())
    measured = [r["tok_s"] for r in report["ranked"]]
    assert measured == sorted(measured, reverse=True)
    best = report["ranked"][0]
    assert best["speculative"], report["ranked"]  # the model's best point: 16% over no-spec
    assert report["best"]["id"] == best["id"]
    steps, _, draft = (int(part[1:]) for part in best["id"].split("-"))
    plain = next(r for r in report["ranked"] if not r["speculative"])
    # The bench measured the stand-in, not a figure of its own: near the model's throughput, and
    # below it rather than above, as a loaded machine slows the stand-in (425 tok/s against the
    # model's 533 in a CI-like run with load 6 on 2 cores). The ranking above is the claim.
    model = model_throughput(None, CONCURRENCY, 0.6)
    assert 0.5 * model <= plain["tok_s"] <= 1.1 * model, (plain["tok_s"], model)
    assert {r["max_running_requests"] for r in report["ranked"]} == {48}
    for row in report["ranked"]:
        assert row["speedup"] == pytest.approx(row["tok_s"] / plain["tok_s"], rel=1e-3)
        assert row["ttft_p99_s"] > 0 and row["itl_p99_s"] > 0  # the client's latency, beside
    assert report["verdict"].startswith(f"Speculation pays at concurrency 8: {best['id']} at ")
    failed = {r["id"]: r["reason"] for r in report["failed"]}
    assert set(failed) == {"s1-k2-d1"}
    assert "did not become healthy: crashed" in failed["s1-k2-d1"]
    assert {r["id"] for r in report["invalid"]} == {"s1-k1-d4", "s3-k1-d2"}
    markdown = (run_dir / "report.md").read_text()
    assert f"**{report['verdict']}**" in markdown and "stand-in" in markdown
    assert f"| `{best['id']}` | " in markdown and "p99 TTFT ms" in markdown
    assert "`s1-k2-d1` |" in markdown
    assert (run_dir / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Applied: the profile carries the best point and the node runs it, verified.
    drafter = _profile(tuning["profile"])["drafter"]
    assert (drafter["num_steps"], drafter["eagle_topk"], drafter["num_draft_tokens"]) == (
        steps, 1, draft)
    assert f"applied the best point {best['id']}" in run.output
    _assert_verified_server(deployment, steps, draft)
    metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    assert f"specserve_speculative_draft_tokens {draft}.0" in metrics
    assert not any(tuning["profile"].parent.glob(".*specserve-tune*"))


# The field notes' EAGLE-3 configuration (steps 3, top-k 4, draft tokens 16) and their figures: 82.3
# tok/s with speculation against 90 without, at concurrency 1. The stand-in's acceptance that
# gives 82.3 is solved from its documented model, not written down; the accept length it gives
# stays above the verification gate's floor, so the point passes the gate and is measured.
SEEDS_SHAPE = SpecShape(3, 4, 16)
SEEDS_SPEC_TOK_S = 82.3


def _acceptance_for(target: float, shape: SpecShape, concurrency: int) -> float:
    low, high = 0.0, 0.98
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if model_throughput(shape, concurrency, mid) < target else (
            low, mid)
    return (low + high) / 2


@contextmanager
def _prometheus(workdir: Path, exporter_port: int) -> Iterator[Prometheus]:
    """The real Prometheus scraping the deployment's exporter every second with the project's
    rules (`specserve rules render`), windows and `for:` shortened through the user's overrides."""
    assert not missing_binaries(), "Prometheus not installed: run scripts/setup/system-packages.sh"
    (workdir / "rules").mkdir(parents=True)
    services = Services(workdir)
    port = free_port()
    overrides, rules = workdir / "overrides.yaml", workdir / "rules" / "specserve.yml"
    write_overrides(overrides)
    render_rules(overrides, rules)
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [{"job_name": EXPORTER_JOB,
                            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]}],
    }))
    try:
        services.start("prometheus", [
            PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"])
        prom = Prometheus(f"http://127.0.0.1:{port}")
        wait_until("Prometheus ready", http_ok(prom.url + "/-/ready"), 30, services=services)
        wait_until("the exporter scraped", lambda: prom.targets_up() == {EXPORTER_JOB: "up"}, 30,
                   services=services)
        yield prom
    finally:
        services.stop_all()


def _alert_expr(prom: Prometheus, name: str) -> str:
    return next(r["query"] for g in prom.rule_groups() for r in g["rules"]
                if r["type"] == "alerting" and r["name"] == name)


def _load(dep: Deployment, work: Path, seconds: int) -> None:
    """Real requests at concurrency 1 for `seconds`: decode lines for the exporter to count."""
    key = work / "api-key"
    key.write_text("sk-test-4f1c2a9e7b")
    key.chmod(0o600)
    done = subprocess.run(
        [str(BIN / "specserve"), "bench", "--url", f"http://127.0.0.1:{dep.server_port}",
         "--api-key-file", str(key), "--concurrency", "1", "--duration", str(seconds),
         "--max-tokens", "96", "--out-dir", str(work / "load"), "--overwrite"],
        capture_output=True, text=True, timeout=seconds + 120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


# Independent of the other tests here (its own profile and baseline): two playbooks, four restarts.
@pytest.mark.timeout(2400)
def test_no_speculation_is_deployed_when_it_is_fastest(deployment: Deployment,
                                                       tuning: dict[str, Any],
                                                       tmp_path: Path) -> None:
    acceptance = _acceptance_for(SEEDS_SPEC_TOK_S, SEEDS_SHAPE, 1)
    assert model_throughput(SEEDS_SHAPE, 1, acceptance) == pytest.approx(SEEDS_SPEC_TOK_S)
    assert model_throughput(None, 1, acceptance) == pytest.approx(90.0)
    behaviour = tmp_path / "behaviour.yaml"
    behaviour.write_text(f"acceptance: {acceptance:.6f}\n")
    behaviour.chmod(0o644)
    tmp_path.chmod(0o755)  # the stand-in's user reads the mounted file
    # The field notes' profile, with the baseline the stand-in's model gives without speculation
    # (90 tok/s at concurrency 1) recorded like for like: baseline.yml measuring one is
    # test_baseline_is_measured_recorded_and_published's; this test starts from the field notes'
    # state.
    profile = tuning["profile"].parent / "seeds.yaml"
    write_profile(profile, deployment.server_port, **{
        "logging.decode_log_interval": 10, "drafter.num_steps": 3, "drafter.eagle_topk": 4,
        "drafter.num_draft_tokens": 16})
    # What baseline.yml records: the profile's settings, the image, the version /server_info gave.
    settings = profile_settings(load_profile(profile), IMAGE, f"{PINNED_VERSION}+{STANDIN_NAME}")
    doc = _profile(profile)
    doc["baseline"] = {
        "gen_throughput_tok_s": {"1": round(model_throughput(None, 1, acceptance), 1)},
        "source": "the stand-in's documented model without speculation (docs/standin.md)",
        **{key: settings[key] for key in SETTINGS if key in settings}}
    profile.write_text(yaml.safe_dump(doc, sort_keys=False))
    extra = tmp_path / "vars.yml"
    inventory_env = yaml.safe_load(deployment.inventory.read_text())["specserve"]["vars"].get(
        "server_env", {})
    extra.write_text(yaml.safe_dump({
        **yaml.safe_load(tuning["extra"].read_text()),
        "specserve_profile": str(profile),
        "server_env": {**inventory_env, **FAST,
                       "SPECSERVE_STANDIN_BEHAVIOUR_FILE": "/etc/standin/behaviour.yaml"},
        "server_volumes": [f"{behaviour}:/etc/standin/behaviour.yaml:ro"],
        "tune_runs_dir": str(tmp_path / "runs"),
        "tune_concurrency": 1,
        "tune_grid": {"num_steps": [3], "eagle_topk": [4], "num_draft_tokens": [16]},
        "tune_points": [],
        "tune_apply_best": True,
    }))
    run = _playbook(deployment, "deploy", extra, "--skip-tags", "monitoring")
    assert run.rc == 0, run.output[-6000:]
    assert "the baseline was measured under other settings" not in run.output
    assert "records none of the settings" not in run.output
    with _prometheus(tmp_path / "prometheus", deployment.exporter_port) as prom:
        below = _alert_expr(prom, "SpecDecodeBelowBaseline")
        # Before: the field notes' speculative server is below its baseline, and the alert's own
        # expression says so (the witness that "silent" below is not a blind query).
        _load(deployment, tmp_path, 25)
        before = prom.query(below)
        assert before, f"{below} is empty while speculating at 82.3 tok/s against 90"
        assert float(before[0]["value"][1]) < 0.97, before

        run = _playbook(deployment, "tune", extra, timeout=1500)
        assert run.rc == 0, run.output[-8000:]
        run_dir = next((tmp_path / "runs" / "localhost").glob("run-*"))
        report = json.loads((run_dir / "report.json").read_text())
        assert [r["id"] for r in report["ranked"]] == ["no-spec", "s3-k4-d16"]
        plain, spec = report["ranked"]
        # The server-side numbers are the model's, within what decode-log windows add.
        assert plain["tok_s"] == pytest.approx(90.0, rel=0.12)
        assert spec["tok_s"] == pytest.approx(SEEDS_SPEC_TOK_S, rel=0.12)
        assert plain["max_running_requests"] == spec["max_running_requests"] == 48
        sentence = (f"No speculation is fastest at concurrency 1: {plain['tok_s']:.1f} tok/s "
                    f"against {spec['tok_s']:.1f} tok/s for the best speculative point "
                    "s3-k4-d16, so speculation does not pay here")
        assert report["verdict"] == sentence + "."
        assert f"**{sentence}.**" in (run_dir / "report.md").read_text()
        assert sentence + "; the node now serves without a drafter" in run.output
        # The profile is the one measured: no drafter, the same cap, no baseline to compare
        # with; the previous one is in the backup beside it.
        written = _profile(profile)
        assert "drafter" not in written and "baseline" not in written
        assert written["server"]["max_running_requests"] == 48
        backups = list(profile.parent.glob("seeds.yaml.*~"))
        assert backups and _profile(backups[0])["drafter"]["num_draft_tokens"] == 16
        # The node serves it, verified: no speculation, the last good spec is this one.
        info = docker_inspect(deployment.prefix)
        assert info is not None and info["State"]["Running"]
        good = (deployment.state_dir / "last-good" / "spec-hash").read_text().strip()
        assert info["Config"]["Labels"]["io.specserve.spec-hash"] == good
        served = json.loads(http_get(f"http://127.0.0.1:{deployment.server_port}/server_info",
                                     {"Authorization": "Bearer sk-test-4f1c2a9e7b"}))
        assert served["speculative_algorithm"] is None
        assert served["max_running_requests"] == 48
        # After: under the same load the alert's expression is silent, while the exporter
        # sees the server decoding.
        _load(deployment, tmp_path, 25)
        assert prom.query(below) == []
        assert prom.value(f"sum({DECODE_LINE_RATE}{WINDOW})") > 0
        assert "SpecDecodeBelowBaseline" not in prom.alert_states()
    assert not any(profile.parent.glob(".*specserve-tune*"))


def _behaviour_vars(dep: Deployment, tmp_path: Path, acceptance: float) -> dict[str, Any]:
    behaviour = tmp_path / "behaviour.yaml"
    behaviour.write_text(f"acceptance: {acceptance:.6f}\n")
    behaviour.chmod(0o644)
    tmp_path.chmod(0o755)  # the stand-in's user reads the mounted file
    inventory_env = yaml.safe_load(dep.inventory.read_text())["specserve"]["vars"].get(
        "server_env", {})
    return {"server_env": {**inventory_env, **FAST,
                           "SPECSERVE_STANDIN_BEHAVIOUR_FILE": "/etc/standin/behaviour.yaml"},
            "server_volumes": [f"{behaviour}:/etc/standin/behaviour.yaml:ro"]}


# Acceptance 0.5 for the profile's chain (steps 3, top-k 1, 4 draft tokens): the stand-in's model
# has speculation paying at concurrency 1 and not at 8, so the mix decides and there is a crossover.
MIX_ACCEPTANCE = 0.5
MIX = {1: 0.8, 8: 0.2}


@pytest.mark.timeout(2400)
def test_a_traffic_mix_ranks_by_its_weights_and_finds_the_crossover(
        deployment: Deployment, tuning: dict[str, Any], tmp_path: Path) -> None:
    shape = SpecShape(3, 1, 4)
    model = {c: (model_throughput(None, c, MIX_ACCEPTANCE),
                 model_throughput(shape, c, MIX_ACCEPTANCE)) for c in MIX}
    assert model[1][1] > 1.2 * model[1][0] and model[8][1] < 0.9 * model[8][0]
    weighted = [sum(w * model[c][i] for c, w in MIX.items()) for i in (0, 1)]
    assert weighted[1] > 1.05 * weighted[0]  # over this mix speculation still pays
    # Another method ranked in the same sweep: NGRAM, a wide one-step tree SGLang resolves to
    # top-k 24 (its BFS breadth), 24 draft tokens; the stand-in's model puts it last at both
    # levels by a wide margin, so noise cannot reorder it.
    ngram = SpecShape(1, 24, 24)
    assert all(model_throughput(ngram, c, MIX_ACCEPTANCE) < 0.9 * min(model[c]) for c in MIX)
    profile = tuning["profile"].parent / "mix.yaml"
    write_profile(profile, deployment.server_port, **{"logging.decode_log_interval": 10})
    before = profile.read_text()
    extra = tmp_path / "vars.yml"
    settings = {**yaml.safe_load(tuning["extra"].read_text()),
                **_behaviour_vars(deployment, tmp_path, MIX_ACCEPTANCE),
                "specserve_profile": str(profile), "tune_runs_dir": str(tmp_path / "runs"),
                "tune_grid": {"num_steps": [3], "eagle_topk": [1], "num_draft_tokens": [4]},
                "tune_points": [], "tune_apply_best": False,
                "tune_methods": [{"algorithm": "NGRAM", "num_draft_tokens": 24,
                                  "ngram_max_bfs_breadth": 24}]}
    # A mix naming a level that is not benched is refused before anything restarts.
    extra.write_text(yaml.safe_dump({**settings, "tune_traffic_mix": {1: 0.5, 4: 0.5},
                                     "tune_bench_concurrency": [1, 8]}))
    refused = _playbook(deployment, "tune", extra)
    assert refused.rc != 0
    assert ("tune_traffic_mix names concurrency 4, which is not benched "
            "(tune_bench_concurrency is [1, 8]); add 4 to tune_bench_concurrency") in refused.output
    assert "Point | deploy it" not in refused.output

    # The NGRAM point's outputs loop (SPECSERVE_STANDIN_LOOP_WHEN), which its drafter accepts
    # at 0.98: measured, then refused a rank with which point and how many requests (issue 31
    # item 3), and the role says so apart from the table.
    looping = {**settings["server_env"],
               "SPECSERVE_STANDIN_LOOP_WHEN": "speculative_algorithm=NGRAM"}
    extra.write_text(yaml.safe_dump({**settings, "server_env": looping,
                                     "tune_traffic_mix": MIX}))
    run = _playbook(deployment, "tune", extra, timeout=1500)
    assert run.rc == 0, run.output[-8000:]
    run_dir = next((tmp_path / "runs" / "localhost").glob("run-*"))
    report = json.loads((run_dir / "report.json").read_text())
    ranked = {r["id"]: r for r in report["ranked"]}
    assert [r["id"] for r in report["ranked"]] == ["s3-k1-d4", "no-spec"]
    [refused] = report["refused"]
    assert refused["id"] == "ngram" and refused["drafter"]["algorithm"] == "NGRAM"
    judged = sum(lv["degenerate"]["judged"] for lv in refused["levels"].values())
    assert judged > 0 and refused["reason"].startswith(
        f"outputs degenerated: {judged} of {judged} requests looped (seq-rep-4 > 0.5; ")
    assert "Tune | refused, outputs degenerated" in run.output
    assert "ngram: outputs degenerated: " in run.output
    for row in ranked.values():  # the figure is the mix's weighted mean of the measured levels
        levels = row["levels"]
        assert row["tok_s"] == pytest.approx(
            sum(w * levels[str(c)]["server_gen_tok_s"] for c, w in MIX.items()), rel=1e-3)
    assert report["best"]["id"] == "s3-k1-d4"
    winners = {row["concurrency"]: row["winner"] for row in report["per_concurrency"]}
    assert winners == {1: "s3-k1-d4", 8: "no-spec"}
    assert report["crossover"]["concurrency"] == 8
    markdown = (run_dir / "report.md").read_text()
    assert "over the traffic mix 1: 0.8, 8: 0.2" in markdown
    assert "| `ngram` | outputs degenerated: " in markdown
    assert "speculation pays up to concurrency 1 and stops paying from 8" in markdown
    # Not applied: the profile as it was, its server back and verified.
    assert profile.read_text() == before
    assert "not applied (tune_apply_best: false)" in run.output
    _assert_verified_server(deployment, 3, 4)


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
