"""The dcgm_exporter role and its scrape job (issue 32 item 2), without a GPU.

Real `ansible-playbook` runs of the shared role and dcgm_exporter: on the CPU stand-in's profile
the role deploys nothing and says why; with a GPU profile and the preflight's GPU facts forced,
a check-mode run renders the container the role would start, read back from the module's own
arguments (the json callback): the pinned image, the counters file read-only, the listener on
the loopback, every capability dropped, the GPUs through the NVIDIA runtime. The monitoring
role's exported scrape config gains the dcgm-exporter job the GPU alerts select on a GPU profile,
and has none on the stand-in's; SpecServeGpuMissing compares with the profile's GPU count unless
the deployment's overrides set it.

Multi-node (group specserve_multinode): rank 1's exporter listens on its inventory address, and
rank 0's exported scrape config (rendered by the node role's monitoring entry after the shared
role ran on every rank) lists every rank whose exporter is deployed, labelled with node and rank,
a configuration `promtool check config` accepts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.monitoring import dcgm
from specserve.monitoring.rules import DCGM_JOB

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
STANDIN = ROOT / "profiles" / "standin-cpu.yaml"
KIMI = ROOT / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
ONE_GPU = ROOT / "profiles" / "llama-3.1-8b-eagle3-1gpu.yaml"
MULTINODE = ROOT / "tests" / "fixtures" / "profiles" / "multinode-kimi-2x8gpu.yaml"
GPUS = [{"name": "NVIDIA H200", "memory_gib": 139.8, "driver_version": "570.124.06"}] * 8


def _play(tmp: Path, roles: list[str], variables: dict[str, Any], check: bool = False,
          hosts: dict[str, dict[str, Any]] | None = None,
          extra_tasks: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Run the roles (then `extra_tasks`) on localhost, or on `hosts` (inventory group
    specserve_multinode, each connecting locally); the result of each task by name (json
    callback), of the first host."""
    play = tmp / "play.yml"
    play.write_text(yaml.safe_dump([{
        "name": "dcgm exporter", "hosts": "specserve_multinode" if hosts else "localhost",
        "connection": "local", "gather_facts": False,
        "tasks": [{"name": role, "ansible.builtin.import_role": {"name": role}} for role in roles]
        + (extra_tasks or []),
    }]), encoding="utf-8")
    inventory = "localhost,"
    if hosts:
        inventory = str(tmp / "inventory.yml")
        Path(inventory).write_text(yaml.safe_dump(
            {"specserve_multinode": {"hosts": hosts}}), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), str(play), "-i", inventory,
            "-e", json.dumps({"ansible_python_interpreter": str(BIN / "python"), **variables})]
    done = subprocess.run(argv + (["--check"] if check else []), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # The profile_tasks callback prints its timings around the json document.
    report, _end = json.JSONDecoder().raw_decode(done.stdout[done.stdout.index("{"):])
    host = next(iter(hosts)) if hosts else "localhost"
    # Task names as the callback gives them: "role : name".
    return {task["task"]["name"].split(" : ", 1)[-1]: task["hosts"][host]
            for play_ in report["plays"] for task in play_["tasks"] if host in task["hosts"]}


def _scrape_jobs(path: Path) -> dict[str, list[str]]:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
            for job in config["scrape_configs"]}  # fmt: skip


def _export(tmp: Path, profile: Path) -> dict[str, dict[str, Any]]:
    return _play(tmp, ["specserve", "dcgm_exporter", "monitoring"], {
        "specserve_profile": str(profile), "monitoring_enabled": False,
        "monitoring_export_dir": str(tmp / "export"),
        "monitoring_source_dir": str(ROOT / "monitoring"),
        "dcgm_exporter_config_dir": str(tmp / "dcgm"),
    })


def test_a_cpu_node_gets_a_message_and_no_scrape_job(tmp_path: Path) -> None:
    tasks = _export(tmp_path, STANDIN)
    skip = tasks["DCGM exporter | not on this node"]
    assert skip["msg"] == ("localhost: the DCGM exporter is not deployed: profile standin-cpu "
                           "asks for 0 GPUs (CPU node).")
    assert tasks["DCGM exporter | container"].get("skipped") is True
    assert not (tmp_path / "dcgm").exists()
    assert DCGM_JOB not in _scrape_jobs(tmp_path / "export" / "scrape-config.yml")


# The docker modules ask the engine (the image is looked up even in check mode); nothing is run.
@pytest.mark.docker
def test_a_gpu_node_renders_the_pinned_exporter_least_privileged(tmp_path: Path) -> None:
    # One node: the exporter on the loopback only.
    tasks = _play(tmp_path, ["specserve", "dcgm_exporter"], {
        "specserve_profile": str(KIMI), "dcgm_exporter_gpus": GPUS,
        "dcgm_exporter_config_dir": str(tmp_path / "dcgm"),
    }, check=True)
    assert tasks["DCGM exporter | not on this node"].get("skipped") is True
    container = tasks["DCGM exporter | container"]
    assert container["changed"] is True
    args = container["invocation"]["module_args"]
    pins = yaml.safe_load((ROOT / "versions.yaml").read_text(encoding="utf-8"))
    image = pins["upstream_images"]["dcgm_exporter"]
    assert args["image"] == f"{image['repository']}:{image['tag']}"
    assert args["command"] == ["--collectors=/etc/specserve-dcgm/specserve-counters.csv",
                               "--address=127.0.0.1:9400"]
    assert args["volumes"] == [f"{tmp_path / 'dcgm'}:/etc/specserve-dcgm:ro"]
    assert args["network_mode"] == "host"
    assert args["cap_drop"] == ["ALL"] and args["capabilities"] == []
    assert args["security_opts"] == ["no-new-privileges"]
    assert args["device_requests"][0]["driver"] == "nvidia"
    assert args["device_requests"][0]["count"] == -1
    # The counters file it would install is the generated one (check mode writes nothing).
    copied = tasks["DCGM exporter | the counters file it collects"]
    assert copied["changed"] is True and not (tmp_path / "dcgm").exists()
    role_file = ROOT / "ansible/roles/dcgm_exporter/files/specserve-counters.csv"
    assert role_file.read_text(encoding="utf-8") == dcgm.deployed_counters()


def _gpu_missing_expr(path: Path) -> str:
    rules = yaml.safe_load(path.read_text(encoding="utf-8"))
    (rule,) = [r for g in rules["groups"] for r in g["rules"]
               if r.get("alert") == "SpecServeGpuMissing"]  # fmt: skip
    return rule["expr"]


def _gpus_line(export: Path) -> float:
    dashboard = json.loads((export / "grafana" / "specserve.json").read_text(encoding="utf-8"))
    (panel,) = [p for p in dashboard["panels"] if p.get("title") == "GPUs seen per node"]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return next(s["value"] for s in steps if s["value"] is not None)


def _grafana_gpus(export: Path) -> float:
    """The limit of the Grafana-managed SpecServeGpuMissing rule's threshold step."""
    document = yaml.safe_load((export / "grafana" / "specserve-alerts.yml").read_text("utf-8"))
    (rule,) = [r for group in document["groups"] for r in group["rules"]
               if r["title"] == "SpecServeGpuMissing"]
    (condition,) = [d for d in rule["data"] if d["model"].get("type") == "threshold"]
    return float(condition["model"]["conditions"][0]["evaluator"]["params"][0])


def test_a_gpu_profile_scrapes_the_exporter_and_counts_its_gpus(tmp_path: Path) -> None:
    # Export mode (the files for a Prometheus of one's own) renders the scrape config and rules.
    export = {"monitoring_enabled": False, "monitoring_source_dir": str(ROOT / "monitoring"),
              # The 1-GPU profile writes no log file for a specserve exporter to follow.
              "specserve_exporter_enabled": False, "specserve_verify": False}
    tasks = _play(tmp_path, ["specserve", "monitoring"], {
        **export, "specserve_profile": str(ONE_GPU),
        "monitoring_export_dir": str(tmp_path / "export"),
    })
    assert tasks["Rules | remove the overrides with the GPU count"]["changed"] is False
    assert _scrape_jobs(tmp_path / "export" / "scrape-config.yml")[DCGM_JOB] == ["127.0.0.1:9400"]
    # SpecServeGpuMissing compares with the profile's GPUs per node (1), not the default 8...
    assert _gpu_missing_expr(tmp_path / "export" / "specserve-rules.yml").endswith("\n< 1")
    # ... and the dashboard's GPUs-per-node line is at that count too.
    assert _gpus_line(tmp_path / "export") == 1
    # ... and so does Grafana's copy of the alert.
    assert _grafana_gpus(tmp_path / "export") == 1
    # ... unless the deployment's overrides set it.
    overrides = tmp_path / "overrides.yml"
    overrides.write_text(yaml.safe_dump(
        {"alerts": {"SpecServeGpuMissing": {"thresholds": {"gpus": 3}}}}), encoding="utf-8")
    _play(tmp_path, ["specserve", "monitoring"], {
        **export, "specserve_profile": str(ONE_GPU), "specserve_alert_overrides": str(overrides),
        "monitoring_export_dir": str(tmp_path / "export-set"),
    })
    assert _gpu_missing_expr(tmp_path / "export-set" / "specserve-rules.yml").endswith("\n< 3")
    assert _gpus_line(tmp_path / "export-set") == 3
    assert _grafana_gpus(tmp_path / "export-set") == 3
    off = _play(tmp_path, ["specserve", "monitoring"], {
        **export, "specserve_profile": str(KIMI), "specserve_dcgm_exporter_enabled": False,
        "monitoring_export_dir": str(tmp_path / "export-off"),
    })
    assert off and DCGM_JOB not in _scrape_jobs(tmp_path / "export-off" / "scrape-config.yml")


# The docker modules ask the engine (the image is looked up even in check mode); nothing is run.
@pytest.mark.docker
def test_a_multinode_rank_listens_on_its_inventory_address(tmp_path: Path) -> None:
    # Rank 1 of a two-node server: rank 0's Prometheus scrapes it, so it listens on the address
    # the ranks reach each other on, not the loopback.
    tasks = _play(tmp_path, ["specserve", "dcgm_exporter"], {
        "specserve_profile": str(MULTINODE), "dcgm_exporter_gpus": GPUS,
        "dcgm_exporter_config_dir": str(tmp_path / "dcgm"),
        "specserve_exporter_enabled": False, "specserve_verify": False,
    }, check=True, hosts={"rank1": {"ansible_host": "10.0.0.2", "specserve_node_rank": 1}})
    args = tasks["DCGM exporter | container"]["invocation"]["module_args"]
    assert args["command"][1] == "--address=10.0.0.2:9400"
    assert args["network_mode"] == "host" and args["cap_drop"] == ["ALL"]


def _rank(rank: int, address: str, **extra: Any) -> dict[str, Any]:
    return {"ansible_host": address, "specserve_node_rank": rank, **extra}


def _multinode_scrape(tmp: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    """Rank 0's exported scrape config for `hosts`, rendered by the node role's monitoring entry
    (the monitoring role on rank 0 only) after the shared role ran on every rank."""
    tmp.mkdir()
    out = tmp / "export"
    tasks = _play(tmp, ["specserve"], {
        "specserve_profile": str(MULTINODE), "monitoring_enabled": False,
        "monitoring_source_dir": str(ROOT / "monitoring"), "monitoring_export_dir": str(out),
        "specserve_exporter_enabled": False, "specserve_verify": False,
        "node_rank": "{{ specserve_node_rank }}",
    }, hosts=hosts, extra_tasks=[{"name": "monitoring", "ansible.builtin.import_role": {
        "name": "node", "tasks_from": "monitoring"}}])
    assert tasks  # rank 0's results
    return out / "scrape-config.yml"


def _dcgm_targets(path: Path) -> list[tuple[list[str], dict[str, str]]]:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == DCGM_JOB]
    return [(sc["targets"], sc["labels"]) for sc in job["static_configs"]]


def test_rank_0_scrapes_every_ranks_exporter(tmp_path: Path) -> None:
    scrape = _multinode_scrape(tmp_path / "two", {
        "rank0": _rank(0, "10.0.0.1"), "rank1": _rank(1, "10.0.0.2")})
    assert _dcgm_targets(scrape) == [
        (["10.0.0.1:9400"], {"node": "rank0", "rank": "0"}),
        (["10.0.0.2:9400"], {"node": "rank1", "rank": "1"}),
    ]
    # The rendered file is a configuration the real Prometheus accepts.
    check = subprocess.run([shutil.which("promtool") or "promtool", "check", "config",
                            str(scrape)], capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr

    # A rank whose exporter is off is left out; one set to a wildcard listen host (and its own
    # port) is scraped on its inventory address, an IPv6 one in brackets.
    scrape = _multinode_scrape(tmp_path / "mixed", {
        "rank0": _rank(0, "10.0.0.1", specserve_dcgm_exporter_enabled=False),
        "rank1": _rank(1, "fd00::2", specserve_dcgm_exporter_listen_host="0.0.0.0",
                       specserve_dcgm_exporter_port=9500),
    })
    assert _dcgm_targets(scrape) == [(["[fd00::2]:9500"], {"node": "rank1", "rank": "1"})]
