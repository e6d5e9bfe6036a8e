"""The Python plugins the roles use, against recorded nvidia-smi outputs and real files."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMI = Path(__file__).resolve().parent / "fixtures" / "nvidia-smi"


def _load(relative: str) -> ModuleType:
    path = ROOT / "ansible" / "plugins" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


smi = _load("filter/nvidia_smi.py")
prom = _load("filter/prometheus_text.py")
profile_filter = _load("filter/specserve_profile.py")
weights = _load("modules/specserve_weights_verify.py")
probe = _load("modules/specserve_server_probe.py")
poll = _load("action/specserve_poll.py")
router_workers = _load("filter/router_workers.py")


def test_recorded_h100_query() -> None:
    gpus = smi.parse_query_gpu((SMI / "h100-80gb-x1.query-gpu.csv").read_text())
    assert gpus == [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559.0,
                     "memory_gib": 79.65, "driver_version": "580.159.04"}]


def test_recorded_h100_topology_with_ansi_header() -> None:
    text = (SMI / "h100-80gb-x1.topo-m.txt").read_text()
    assert "\x1b[4m" in text  # the real output underlines its header
    assert smi.parse_topology(text) == {"gpu_count": 1, "links": {"GPU0": {}}, "kind": "single"}


def test_eight_pcie_gpus() -> None:
    topo = smi.parse_topology((SMI / "rtx-pro-6000-x8-pcie.topo-m.txt").read_text())
    assert topo["gpu_count"] == 8 and topo["kind"] == "pcie"
    assert topo["links"]["GPU0"]["GPU1"] == "NODE" and topo["links"]["GPU0"]["GPU7"] == "SYS"
    gpus = smi.parse_query_gpu((SMI / "rtx-pro-6000-x8-pcie.query-gpu.csv").read_text())
    assert len(gpus) == 8 and min(g["memory_gib"] for g in gpus) >= 94  # the Kimi profile's floor


def test_eight_nvlink_gpus_with_nic_rows() -> None:
    topo = smi.parse_topology((SMI / "h100-sxm-x8-nvlink.topo-m.txt").read_text())
    assert topo["gpu_count"] == 8 and topo["kind"] == "nvlink"
    assert set(topo["links"]["GPU3"].values()) == {"NV18"}


def test_mixed_topology() -> None:
    text = (SMI / "h100-sxm-x8-nvlink.topo-m.txt").read_text().replace(
        "GPU1\tNV18", "GPU1\tSYS", 1)
    assert smi.parse_topology(text)["kind"] == "mixed"


def test_compute_apps() -> None:
    assert smi.parse_compute_pids((SMI / "h100-80gb-x1.compute-apps-busy.csv").read_text()) == [405]
    assert smi.parse_compute_pids((SMI / "h100-80gb-x1.compute-apps-empty.csv").read_text()) == []


@pytest.mark.parametrize(("text", "fragment"), [
    ("NVIDIA H100, 81559, 580.1\n", "is not '<number> MiB'"),
    ("garbage\n", "expected 'name, memory.total, driver_version'"),
])
def test_bad_query_output_is_named(text: str, fragment: str) -> None:
    with pytest.raises(smi.NvidiaSmiParseError, match=fragment):
        smi.parse_query_gpu(text)


def test_not_a_topology() -> None:
    with pytest.raises(smi.NvidiaSmiParseError, match="topo -m"):
        smi.parse_topology("No devices were found\n")


def test_prometheus_sum_by_label() -> None:
    text = (
        '# TYPE specserve_log_lines_parsed_total counter\n'
        'specserve_log_lines_parsed_total{kind="decode"} 7.0\n'
        'specserve_log_lines_parsed_total{kind="prefill"} 3.0\n'
        '# TYPE specserve_decode_accept_length histogram\n'
        'specserve_decode_accept_length_bucket{dp="0",tp="0",pp="0",le="+Inf"} 2.0\n'
        'specserve_decode_accept_length_sum{dp="0",tp="0",pp="0"} 4.4\n'
        'specserve_decode_accept_length_count{dp="0",tp="0",pp="0"} 2.0\n'
    )
    assert prom.prometheus_sum(text, "specserve_log_lines_parsed_total", kind="decode") == 7.0
    assert prom.prometheus_sum(text, "specserve_log_lines_parsed_total") == 10.0
    assert prom.prometheus_sum(text, "specserve_decode_accept_length_sum") == pytest.approx(4.4)
    assert prom.prometheus_sum(text, "absent_metric") == 0


def test_profile_facts_of_the_shipped_profiles() -> None:
    kimi = profile_filter.profile_facts(str(ROOT / "profiles/kimi-k2.5-int4-eagle3-8gpu.yaml"))
    assert (kimi["gpu_count"], kimi["gpu_topology"]) == (8, "pcie")
    assert kimi["nccl_preset"] == "pcie-8gpu-seeds"
    assert (kimi["server_port"], kimi["probe_host"]) == (8000, "127.0.0.1")
    assert kimi["draft_tokens"] == 4 and kimi["baseline"] == "1=90"
    assert kimi["api_key_file"] == "/run/secrets/specserve/api-key"
    assert kimi["target_path"] == "/models/Kimi-K2.5"
    assert kimi["health_url"] == "http://127.0.0.1:8000/health_generate"
    assert kimi["ready_url"] == "http://127.0.0.1:8000/ready"
    assert kimi["metrics_url"] == "http://127.0.0.1:8000/metrics"
    standin = profile_filter.profile_facts(str(ROOT / "profiles/standin-cpu.yaml"))
    assert standin["gpu_count"] == 0 and standin["api_key_file"] == ""
    assert standin["gpus_needed"] == 1  # tp 1 on the CPU: no GPU asked for, none needed
    assert standin["drafter_path"] == "../tests/fixtures/models/EAGLE3-LLaMA3.1-Instruct-8B"
    # Ansible 2.19 conditionals take booleans only, and a None would render as "None".
    assert None not in standin.values() and None not in kimi.values()


@pytest.mark.parametrize(
    ("host", "local"),
    [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("", "127.0.0.1"), (None, "127.0.0.1"),
     ("10.0.0.5", "10.0.0.5"), ("127.0.0.1", "127.0.0.1")],
)
def test_local_host_reaches_a_wildcard_bind_on_loopback(host: str | None, local: str) -> None:
    assert profile_filter.local_host(host) == local


def test_profile_facts_refuse_a_schema_error(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("version: 1\nname: x\n")
    with pytest.raises(Exception, match="'target' is a required property") as raised:
        profile_filter.profile_facts(str(bad))
    assert type(raised.value).__name__ == "AnsibleTemplatePluginError"  # a clean play failure


def _shard(path: Path, data_len: int, truncate: int = 0) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [data_len // 4],
                               "data_offsets": [0, data_len]}}).encode()
    blob = struct.pack("<Q", len(header)) + header + b"\0" * data_len
    path.write_bytes(blob[: len(blob) - truncate])


def _model(root: Path, shards: int = 2) -> Path:
    root.mkdir()
    (root / "config.json").write_text("{}")
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    (root / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 64 * shards},
         "weight_map": {f"t{i}": n for i, n in enumerate(names)}}))
    for name in names:
        _shard(root / name, 64)
    return root


def test_weights_complete(tmp_path: Path) -> None:
    result = weights.verify(_model(tmp_path / "m"), {})
    assert result["complete"] and result["files"] == 2, result


def test_weights_missing_truncated_and_checksum(tmp_path: Path) -> None:
    root = _model(tmp_path / "m", shards=3)
    (root / "model-00003-of-00003.safetensors").unlink()
    _shard(root / "model-00002-of-00003.safetensors", 64, truncate=10)
    result = weights.verify(root, {"model-00001-of-00003.safetensors": "00" * 32})
    assert not result["complete"]
    text = "\n".join(result["problems"])
    assert "1 of 3 shards missing: model-00003-of-00003.safetensors" in text
    assert "model-00002-of-00003.safetensors: 125 bytes but its header describes 135" in text
    assert "model-00001-of-00003.safetensors: SHA-256 does not match" in text


def test_weights_single_file_drafter_without_index(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    (root / "config.json").write_text("{}")
    _shard(root / "model.safetensors", 32)
    assert weights.verify(root, {})["complete"]


@pytest.mark.parametrize(("state", "restarts", "status", "phase"), [
    (None, 0, 0, "absent"),
    ({"Status": "exited", "Running": False}, 0, 0, "crashed"),
    ({"Status": "running", "Running": True, "Restarting": False}, 1, 0, "crashed"),
    ({"Status": "restarting", "Running": True, "Restarting": True}, 0, 0, "crashed"),
    ({"Status": "running", "Running": True, "Restarting": False}, 0, 0, "loading"),
    ({"Status": "running", "Running": True, "Restarting": False}, 0, 503, "warming"),
    ({"Status": "running", "Running": True, "Restarting": False}, 0, 200, "healthy"),
])
def test_probe_phases(state: dict | None, restarts: int, status: int, phase: str) -> None:
    assert probe.classify(state, restarts, status) == phase


def test_poll_done_conditions() -> None:
    assert poll.is_done({"phase": "healthy"}, "phase", ["healthy", "crashed"], None)
    assert not poll.is_done({"phase": "loading"}, "phase", ["healthy", "crashed"], None)
    assert poll.is_done({"stdout": "\n"}, "stdout", [""], None)  # no GPU compute process left
    assert not poll.is_done({"stdout": "405\n"}, "stdout", [""], None)
    assert poll.is_done({"stdout": "0 exited"}, "stdout", [], "0 ")
    assert not poll.is_done({"stdout": "4242 running"}, "stdout", [], "0 ")


def test_router_routable_counts_a_draining_worker_out() -> None:
    # smg lists a removed worker `draining` for a settle time; the deploy counts it out (the
    # drain's wait, the join's add, up.yml's settling). Order kept.
    workers = [
        {"id": "a", "url": "http://n1:1", "status": "ready", "is_healthy": True},
        {"id": "b", "url": "http://n2:1", "status": "draining", "is_healthy": False},
        {"id": "c", "url": "http://n3:1", "status": "ready", "is_healthy": False},
    ]
    assert [w["id"] for w in router_workers.router_routable(workers)] == ["a", "c"]


def test_router_routable_keeps_entries_without_a_status() -> None:
    # sglang-router 0.3.2, the router a fleet upgrades from, lists no status.
    workers = [{"id": "a", "url": "http://n1:1", "is_healthy": True}]
    assert router_workers.router_routable(workers) == workers


def test_router_draining_names_the_urls_an_add_must_wait_for() -> None:
    workers = [
        {"id": "a", "url": "http://n1:1", "status": "ready"},
        {"id": "b", "url": "http://n2:1", "status": "draining"},
        {"id": "c", "url": "http://n3:1"},
    ]
    assert router_workers.router_draining(workers) == ["http://n2:1"]
