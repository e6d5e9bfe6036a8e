"""The issue's scenarios, in order, against one real stand-in deployment on the Docker engine.

Each test leaves the deployment serving the last good spec for the next one.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
from pathlib import Path

import pytest
import yaml

from specserve.profile.facts import load_facts

from .conftest import Deployment
from .harness import (
    BIN,
    FIXTURES,
    ROOT,
    Run,
    docker_inspect,
    http_get,
    http_status,
    playbook,
    write_profile,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

API_KEY = "sk-test-4f1c2a9e7b"  # in the test vault (fixtures/vault.yml)


def _serving(dep: Deployment) -> dict:
    info = docker_inspect(dep.prefix)
    assert info is not None and info["State"]["Running"], "the server container is not running"
    assert http_status(f"http://127.0.0.1:{dep.server_port}/health_generate") == 200
    return info


def _last_good_hash(dep: Deployment) -> str:
    return (dep.state_dir / "last-good" / "spec-hash").read_text().strip()


def _assert_no_secret(run: Run) -> None:
    assert API_KEY not in run.output, "the API key leaked into the play output"
    assert "grafana-test-6d0b" not in run.output, "the Grafana password leaked into the output"


def test_from_nothing(deployment: Deployment) -> None:
    run = playbook(deployment.inventory)
    assert run.rc == 0, run.output[-6000:]
    _assert_no_secret(run)
    info = _serving(deployment)
    labels = info["Config"]["Labels"]
    assert labels["io.specserve.spec-hash"] == _last_good_hash(deployment)
    assert info["HostConfig"]["NetworkMode"] == "host"
    assert info["HostConfig"]["IpcMode"] == "host"
    assert info["HostConfig"]["LogConfig"] == {
        "Type": "json-file", "Config": {"max-file": "5", "max-size": "100m"}}
    assert info["Config"]["Healthcheck"]["StartPeriod"] == 60 * 10**9
    # Docker's liveness check asks "is it up" (/ready), never /health: SGLang's /health is
    # /health_generate (a real generation, 503 only after 20 s) unless told otherwise.
    assert info["Config"]["Healthcheck"]["Test"][-1].endswith(f":{deployment.server_port}/ready")
    # The gate polled /health_generate with requests that outlast SGLang's 20 s.
    assert "/health_generate" in run.output and "Start | gate on /health_generate" in run.output
    assert "gate passed" in run.output
    # The API key reached the server: the stand-in refuses requests without it.
    with pytest.raises(urllib.error.HTTPError) as refused:
        http_get(f"http://127.0.0.1:{deployment.server_port}/v1/models")
    assert refused.value.code == 401
    # Exporter: decode lines from the gate's warm-up, with the profile's draft tokens.
    metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    assert 'specserve_log_lines_parsed_total{kind="decode"}' in metrics
    assert 'specserve_source_up{source="file"} 1.0' in metrics
    _assert_exporter_least_privilege(deployment, info)
    assert "specserve_speculative_draft_tokens 4.0" in metrics
    # Prometheus scrapes the exporter (scrape interval 1 s) and loaded the project's rules.
    query = urllib.parse.quote('up{job="specserve-exporter"}')
    deadline = time.monotonic() + 30
    result: list = []
    while time.monotonic() < deadline:
        body = json.loads(http_get(f"http://127.0.0.1:{deployment.prometheus_port}/api/v1/query?query={query}"))
        result = body["data"]["result"]
        if result and result[0]["value"][1] == "1":
            break
        time.sleep(1)
    assert result and result[0]["value"][1] == "1", result
    rules = json.loads(http_get(f"http://127.0.0.1:{deployment.prometheus_port}/api/v1/rules"))
    names = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
    assert "SpecDecodeAcceptLengthLow" in names
    assert http_status(f"http://127.0.0.1:{deployment.alertmanager_port}/-/ready") == 200
    # No Grafana image here: a clear skip, not a failure.
    assert "Grafana SKIPPED" in run.output and "cannot be pulled" in run.output
    # `specserve diagnose --inventory` finds this deployment's Prometheus and profile from the
    # inventory the play ran with, and reads its evidence there (exit 2 would be unreadable).
    diagnose = subprocess.run(
        [str(BIN / "specserve"), "diagnose", "--inventory", str(deployment.inventory)],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)  # fmt: skip
    assert diagnose.returncode in (0, 1), diagnose.stdout + diagnose.stderr
    assert (f"context: localhost: Prometheus http://127.0.0.1:{deployment.prometheus_port}, "
            f"overrides none (defaults), profile {deployment.profile}") in diagnose.stdout


def _assert_exporter_least_privilege(dep: Deployment, server: dict) -> None:
    """The exporter reads the launcher's log file from a read-only mount, as a non-root user with
    the log directory's group; it has no Docker socket and is not in the docker group."""
    exporter = docker_inspect(f"{dep.prefix}-exporter")
    assert exporter is not None and exporter["State"]["Running"]
    mounts = {m["Destination"]: m for m in exporter["Mounts"]}
    assert not any("docker.sock" in m["Source"] + m["Destination"] for m in exporter["Mounts"])
    assert set(mounts) == {"/var/log/specserve/sglang", "/etc/specserve-exporter"}, mounts
    assert mounts["/etc/specserve-exporter"]["Source"] == str(dep.workdir / "etc/exporter")
    assert mounts["/etc/specserve-exporter"]["RW"] is False
    assert mounts["/var/log/specserve/sglang"]["Source"] == str(dep.workdir / "log")
    assert mounts["/var/log/specserve/sglang"]["RW"] is False
    user = exporter["Config"]["User"]
    assert user == "10001:10001" and not user.startswith(("0", "root")), user
    assert exporter["HostConfig"]["GroupAdd"] == ["10001"]
    assert exporter["HostConfig"]["ReadonlyRootfs"] is True
    cmd = exporter["Config"]["Cmd"]
    assert cmd[:4] == ["--source", "file", "--file", "/var/log/specserve/sglang/sglang.log"]
    # The profile itself, as on the chart's path: the exporter's like-for-like judgement of the
    # baseline runs here too. Not the image: it starts before the server, which a failed deploy
    # rolls back; preflight's `specserve check --image` judges the baseline's image first.
    assert cmd[cmd.index("--profile") + 1] == "/etc/specserve-exporter/profile.yaml"
    assert "--server-image" not in cmd
    # What it reads from its copy is the deployed profile's (the copy itself is re-written only
    # when that changes: an earlier deployment on this worker may differ in server-only fields).
    copy = load_facts(dep.workdir / "etc/exporter/profile.yaml")
    deployed = load_facts(dep.profile)
    assert (copy.draft_tokens, copy.adaptive, copy.baseline_tok_s) == (
        deployed.draft_tokens, deployed.adaptive, deployed.baseline_tok_s)
    assert yaml.safe_load((dep.workdir / "etc/exporter/profile.yaml").read_text()).get(
        "baseline") == yaml.safe_load(dep.profile.read_text()).get("baseline")
    server_mounts = {m["Destination"]: m for m in server["Mounts"]}
    assert server_mounts["/var/log/specserve/sglang"]["RW"] is True
    # On the host: 2750 (setgid, group 10001); the launcher's file is group-readable.
    log_dir = (dep.workdir / "log").stat()
    assert oct(log_dir.st_mode & 0o7777) == "0o2750" and log_dir.st_gid == 10001
    log_file = (dep.workdir / "log" / "sglang.log").stat()
    assert log_file.st_gid == 10001 and log_file.st_mode & 0o040
    # The exporter really reads it as that user: its own view of the file.
    read = "id -u; head -c 1 /var/log/specserve/sglang/sglang.log >/dev/null && echo readable"
    proc = subprocess.run(["docker", "exec", f"{dep.prefix}-exporter", "sh", "-c", read],
                          capture_output=True, text=True, check=False)
    assert proc.stdout.split() == ["10001", "readable"], proc.stdout + proc.stderr


def test_exporter_survives_server_restarts(deployment: Deployment) -> None:
    """Re-creating the server does not re-create the exporter; it keeps following the file."""
    exporter = docker_inspect(f"{deployment.prefix}-exporter")
    assert exporter is not None
    before = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
    subprocess.run(["docker", "restart", deployment.prefix], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and http_status(
            f"http://127.0.0.1:{deployment.server_port}/health_generate") != 200:
        time.sleep(0.5)
    after = docker_inspect(f"{deployment.prefix}-exporter")
    assert after is not None and after["Id"] == exporter["Id"]
    assert after["State"]["StartedAt"] == exporter["State"]["StartedAt"]
    # The restarted server's start-up lines reached the exporter through the same file.
    metrics = ""
    while time.monotonic() < deadline:
        metrics = http_get(f"http://127.0.0.1:{deployment.exporter_port}/metrics")
        if _lines_read(metrics) > _lines_read(before):
            break
        time.sleep(0.5)
    assert _lines_read(metrics) > _lines_read(before)


def _lines_read(metrics: str) -> float:
    match = re.search(r"^specserve_log_lines_read_total (\S+)$", metrics, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_second_run_changes_nothing(deployment: Deployment) -> None:
    before = _serving(deployment)["Id"]
    run = playbook(deployment.inventory)
    assert run.rc == 0, run.output[-4000:]
    assert run.recap()["changed"] == 0, run.output[-6000:]
    assert "Replacing" not in run.output
    assert _serving(deployment)["Id"] == before


def test_check_mode_runs_clean(deployment: Deployment) -> None:
    run = playbook(deployment.inventory, "--check")
    assert run.rc == 0, run.output[-4000:]
    assert run.recap()["changed"] == 0, run.output[-6000:]


def test_profile_change_restarts_once_with_drain(deployment: Deployment) -> None:
    before = _serving(deployment)
    write_profile(deployment.profile, deployment.server_port, **{"logging.decode_log_interval": 20})
    run = playbook(deployment.inventory)
    assert run.rc == 0, run.output[-6000:]
    assert run.output.count("Replacing " + deployment.prefix) == 1
    assert "spec changed" in run.output
    # The restart sequence: the new container prepared while the old one serves, then the swap
    # (stopped, old processes gone (polled), port closed, kept, profile installed, started),
    # then the gate.
    old = before["Id"][:12]
    order = [
        "Prepare | the new container, created and not started",
        "Swap | stop the old server, start the new one",
        f"stopping the old server {old} (running): docker stop --time 120",
        f"old server {old} (pid, status):",
        f"port 127.0.0.1:{deployment.server_port}:",
        f"kept as {deployment.prefix}-prev-1",
        f"profile {deployment.workdir / 'etc/profile.yaml'} installed from",
        f"started {deployment.prefix} (",
        "Start | gate on /health_generate",
        "gate passed",
    ]
    positions = [run.output.index(step) for step in order]
    assert positions == sorted(positions), positions
    assert re.search(r"\(pid, status\): [\d.]+/\d+ s, 0 (exited|removed) \(done\)", run.output)
    assert re.search(r"started \S+ \(\w{12}, prepared as \S+-next\) [\d.]+ s after the stop",
                     run.output)
    assert docker_inspect(f"{deployment.prefix}-next") is None  # renamed, not left behind
    after = _serving(deployment)
    assert after["Id"] != before["Id"]
    assert after["Config"]["Labels"]["io.specserve.spec-hash"] == _last_good_hash(deployment)
    assert "decode_log_interval: 20" in (deployment.workdir / "etc/profile.yaml").read_text()


def test_eagle_on_eagle3_drafter_is_refused(deployment: Deployment) -> None:
    before = _serving(deployment)
    good = deployment.profile.read_text()
    try:
        write_profile(deployment.profile, deployment.server_port,
                      **{"logging.decode_log_interval": 20, "drafter.algorithm": "EAGLE"})
        run = playbook(deployment.inventory)
    finally:
        deployment.profile.write_text(good)
    assert run.rc != 0
    assert "refused by `specserve check`" in run.output
    assert "LlamaForCausalLMEagle3" in run.output and "set drafter.algorithm: EAGLE3" in run.output
    assert "Replacing" not in run.output
    after = _serving(deployment)
    assert after["Id"] == before["Id"]
    assert after["State"]["StartedAt"] == before["State"]["StartedAt"]


def _assert_rolled_back(dep: Deployment, run: Run, good_hash: str) -> None:
    assert run.rc != 0
    assert "Deploy FAILED" in run.output
    assert "Rolled back to the last good spec" in run.output
    assert "Rendered command (specserve render" in run.output and "specserve-standin" in run.output
    info = _serving(dep)
    assert info["Config"]["Labels"]["io.specserve.spec-hash"] == good_hash
    assert info["Config"]["Image"] == "specserve/standin:0.1.0"
    assert _last_good_hash(dep) == good_hash


def test_crashing_image_is_rolled_back(deployment: Deployment, tmp_path: Path) -> None:
    good_hash = _last_good_hash(deployment)
    (tmp_path / "Dockerfile").write_text(
        "FROM specserve/standin:0.1.0\nENV SPECSERVE_STANDIN_CRASH_AFTER_SECONDS=0.3\n")
    image = f"{deployment.prefix}-crashing:1"
    subprocess.run(["docker", "build", "-q", "-t", image, str(tmp_path)], check=True,
                   capture_output=True)
    try:
        run = playbook(deployment.inventory, "-e", f"specserve_image={image}")
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)
    assert "did not become healthy: crashed" in run.output, run.output[-6000:]
    assert "server_health_budget_s = 120 s" in run.output  # the knob that sets the budget
    _assert_rolled_back(deployment, run, good_hash)


def test_accept_length_one_is_caught_and_rolled_back(deployment: Deployment,
                                                      tmp_path: Path) -> None:
    good_hash = _last_good_hash(deployment)
    behaviour = tmp_path / "behaviour.yaml"
    behaviour.write_text("acceptance: 0.0\n")
    behaviour.chmod(0o644)
    extra = tmp_path / "vars.yml"
    inventory_vars = yaml.safe_load(deployment.inventory.read_text())["specserve"]["vars"]
    extra.write_text(yaml.safe_dump({
        "server_volumes": [f"{behaviour}:/etc/standin/behaviour.yaml:ro"],
        "server_env": {**inventory_vars["server_env"],
                       "SPECSERVE_STANDIN_BEHAVIOUR_FILE": "/etc/standin/behaviour.yaml"},
    }))
    run = playbook(deployment.inventory, "-e", f"@{extra}")
    assert "Verification gate FAILED" in run.output, run.output[-6000:]
    assert "mean accept length: 1.0 " in run.output
    assert "accept len: 1.00" in run.output  # the offending decode lines, as evidence
    # The knob the gate checks against: the alert's floor, unless the inventory sets its own.
    assert ("need > 1.5: the SpecDecodeAcceptLengthLow floor (specserve_alert_overrides; "
            "or set verify_accept_length_floor)") in run.output
    # Graph state is evidence on Decode lines only: `cuda graph: False` is normal on Prefill.
    evidence = run.output.split("Offending lines")[-1].split("Rendered command")[0]
    assert "Decode batch" in evidence and "Prefill batch" not in evidence
    _assert_rolled_back(deployment, run, good_hash)


def test_gpu_profile_on_a_machine_without_gpus(deployment: Deployment) -> None:
    run = playbook(deployment.inventory, "--tags", "preflight",
                   "-e", "specserve_profile=profiles/kimi-k2.5-int4-eagle3-8gpu.yaml")
    assert run.rc != 0
    assert "asks for 8 GPU(s), but nvidia-smi" in run.output
    assert "-i playbooks/inventory/standin/hosts.yml" in run.output  # the CPU stand-in's way
    _serving(deployment)


def test_exporter_without_log_file_is_refused(deployment: Deployment) -> None:
    before = _serving(deployment)
    nolog = deployment.workdir / "profiles" / "nolog.yaml"
    write_profile(nolog, deployment.server_port, **{"logging.file": None})
    run = playbook(deployment.inventory, "-e", f"specserve_profile={nolog}")
    assert run.rc != 0
    assert "has no logging.file, but the exporter" in run.output
    assert "Fix: set logging.file in the profile" in run.output
    assert "Replacing" not in run.output and "Exporter | container" not in run.output
    assert _serving(deployment)["Id"] == before["Id"]


def test_monitoring_off_exports_files(deployment: Deployment, tmp_path: Path) -> None:
    export = tmp_path / "export"
    run = playbook(deployment.inventory, "--tags", "preflight,monitoring",
                   "-e", "monitoring_enabled=false", "-e", f"monitoring_export_dir={export}")
    assert run.rc == 0, run.output[-4000:]
    scrape = yaml.safe_load((export / "scrape-config.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    assert jobs["specserve-exporter"]["static_configs"][0]["targets"] == [
        f"localhost:{deployment.exporter_port}"]
    check = subprocess.run(["promtool", "check", "rules", str(export / "specserve-rules.yml")],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads((export / "grafana/specserve.json").read_text())["panels"]
    assert (export / "grafana/specserve-alerts.yml").is_file()


def test_several_nodes_one_at_a_time_stop_at_first_failure(deployment: Deployment,
                                                           tmp_path: Path) -> None:
    before = _serving(deployment)
    bad = deployment.workdir / "profiles" / "bad.yaml"
    write_profile(bad, deployment.server_port, **{"drafter.algorithm": "EAGLE"})
    inventory = deployment.write_inventory(tmp_path / "fleet.yml", {
        "localhost": {},  # the healthy deployment: first, and unchanged
        "node-b": {"specserve_profile": str(bad)},
        "node-c": {"specserve_container_name": f"{deployment.prefix}-c"},
    })
    run = playbook(inventory)
    assert run.rc != 0
    assert run.recap("localhost")["failed"] == 0 and run.recap("localhost")["changed"] == 0
    assert run.recap("node-b")["failed"] == 1
    assert run.output.index("[localhost]") < run.output.index("[node-b]")
    assert "[node-c]" not in run.output and "node-c " not in run.output.split("PLAY RECAP")[-1]
    assert docker_inspect(f"{deployment.prefix}-c") is None
    assert _serving(deployment)["Id"] == before["Id"]


def test_vault_file_is_encrypted() -> None:
    assert (FIXTURES / "vault.yml").read_text().startswith("$ANSIBLE_VAULT;1.1;AES256")
    assert ROOT.joinpath("ansible.cfg").is_file()
