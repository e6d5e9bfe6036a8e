"""Real runs: the orchestrator starts 2 gloo worker processes per preset on 127.0.0.1."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PRESETS = {
    "presets": [
        {"name": "default", "topology": "any", "env": {}},
        # gloo cannot bind to an interface that does not exist: a real worker failure.
        {
            "name": "broken",
            "topology": "any",
            "env": {"NCCL_DEBUG": "WARN", "GLOO_SOCKET_IFNAME": "specserve-no-such-if0"},
        },
        {
            "name": "ring-simple",
            "topology": "pcie",
            "env": {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"},
        },
        {"name": "ll128", "topology": "nvlink", "env": {"NCCL_PROTO": "LL128"}},
    ]
}


def bench(
    tmp_path: Path, *args: str, module: str = "specserve.nccl", sub: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    presets = tmp_path / "presets.json"
    presets.write_text(json.dumps(PRESETS))
    env = {**os.environ, "NCCL_DEBUG": "INFO", "NCCL_PROTO": "LL128"}  # must not leak
    return subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-m",
            module,
            *sub,
            "--presets-json",
            str(presets),
            "--device",
            "cpu",
            "--topology",
            "pcie",
            "--sizes",
            "1,4,64KiB",
            "--iters",
            "5",
            "--warmup",
            "2",
            "--timeout",
            "60",
            "--json-out",
            str(tmp_path / "out" / "result.json"),
            *args,  # last, so they override the defaults above
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )


@pytest.fixture(scope="module")
def forced_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("forced")
    done = bench(tmp_path, "--presets", "broken,ring-simple", "--force")
    return done, json.loads((tmp_path / "out" / "result.json").read_text())


def by_name(document):
    return {entry["name"]: entry for entry in document["presets"]}


def test_run_reports_machine_and_config(forced_run):
    _, document = forced_run
    assert document["schema_version"] == 1
    machine = document["machine"]
    assert (machine["world_size"], machine["device"], machine["backend"]) == (2, "cpu", "gloo")
    assert machine["topology"] == "pcie"
    assert machine["torch_version"].startswith("2.13.0")
    assert machine["inherited_nccl_env_ignored"] == ["NCCL_DEBUG", "NCCL_PROTO"]
    config = document["config"]
    assert [s["label"] for s in config["sizes"]] == ["1tok", "4tok", "64KiB"]
    assert [s["nbytes"] for s in config["sizes"]] == [14336, 57344, 65536]
    assert (config["dtype"], config["iters"], config["warmup"]) == ("bfloat16", 5, 2)
    # What the workers did: CPU ranks time with the wall clock, whatever --timing asks of GPUs.
    assert config["timing"] == "wall"
    assert "wall clock around each synchronous call" in forced_run[0].stdout


def test_each_presets_env_reached_its_workers_and_nothing_else(forced_run):
    _, document = forced_run
    presets = by_name(document)
    assert [e["name"] for e in document["presets"]] == ["default", "broken", "ring-simple"]
    # What SGLang's server sets for itself reaches every preset, `default` included; the
    # inherited NCCL_DEBUG / NCCL_PROTO of the parent do not.
    server = {"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"}
    assert presets["default"]["env_seen"] == [server, server]
    assert presets["ring-simple"]["env_seen"] == [
        {**server, "NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}] * 2
    assert document["config"]["extra_env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "4"


def test_env_flag_overrides_the_servers_own_settings(tmp_path):
    done = bench(tmp_path, "--presets", "default", "--env", "NCCL_NVLS_ENABLE=1")
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "out" / "result.json").read_text())
    seen = by_name(document)["default"]["env_seen"]
    assert seen == [{"NCCL_CUMEM_ENABLE": "0", "NCCL_NVLS_ENABLE": "1"}] * 2


def test_measured_presets_have_positive_finite_numbers(forced_run):
    _, document = forced_run
    presets = by_name(document)
    for name in ("default", "ring-simple"):
        entry = presets[name]
        assert entry["status"] == "ok", entry["error"]
        assert [r["label"] for r in entry["results"]] == ["1tok", "4tok", "64KiB"]
        for result in entry["results"]:
            assert result["iterations"] == 5 and result["correct"] is True
            numbers = [
                *result["latency_us"].values(),
                result["algbw_gbps"],
                result["busbw_gbps"],
                result["speedup_vs_default"],
            ]
            assert all(math.isfinite(x) and x > 0 for x in numbers), result
            lat = result["latency_us"]
            assert lat["min"] <= lat["median"] <= lat["p99"]
            # n=2: bus bandwidth equals algorithm bandwidth
            assert result["busbw_gbps"] == pytest.approx(result["algbw_gbps"])
            assert result["algbw_gbps"] == pytest.approx(
                result["nbytes"] / (lat["median"] * 1e-6) / 1e9
            )
    assert all(r["speedup_vs_default"] == 1.0 for r in presets["default"]["results"])


def test_failing_preset_is_reported_and_not_fatal(forced_run):
    done, document = forced_run
    broken = by_name(document)["broken"]
    assert broken["status"] == "failed"
    assert "Unable to find address for: specserve-no-such-if0" in broken["error"]
    assert broken["results"] == []
    assert any("GLOO_SOCKET_IFNAME is not an NCCL variable" in n for n in broken["notes"])
    assert done.returncode == 1  # one preset failed; the others were still measured


def test_table_on_stdout_and_progress_on_stderr(forced_run):
    done, _ = forced_run
    out = done.stdout
    assert "| size | default | ring-simple |" in out
    assert "| size | bytes | preset | median µs | p99 µs | busbw GB/s | vs default |" in out
    rows = [line for line in out.splitlines() if line.startswith("| 64KiB | 65536 |")]
    assert [row.split("|")[3].strip() for row in rows] == ["default", "ring-simple"]
    assert "- broken: failed: rank " in out
    assert "gloo ignores NCCL_* variables" in out
    assert "[nccl-bench] preset ring-simple (3/3)" in done.stderr
    assert "[nccl-bench]" not in out


def test_ll128_on_pcie_is_refused_through_the_specserve_subcommand(tmp_path):
    done = bench(tmp_path, "--presets", "ll128", module="specserve.cli", sub=("nccl-bench",))
    assert done.returncode == 0, done.stderr
    assert (
        "refusing preset ll128: error: presets.ll128.NCCL_PROTO: NCCL_PROTO='LL128' forces LL128 "
        "on a pcie topology" in done.stderr
    )
    presets = by_name(json.loads((tmp_path / "out" / "result.json").read_text()))
    assert presets["ll128"]["status"] == "refused"
    assert "forces LL128 on a pcie topology" in presets["ll128"]["error"]
    assert presets["default"]["status"] == "ok"
    assert "- ll128: refused: error: presets.ll128.NCCL_PROTO" in done.stdout


def test_bad_input_exits_2_and_names_the_problem(tmp_path):
    done = bench(tmp_path, "--sizes", "1,lots")
    assert done.returncode == 2
    assert "'lots' is neither a token count" in done.stderr
    assert not (tmp_path / "out" / "result.json").exists()


def test_preset_past_its_timeout_is_killed_and_reported(tmp_path):
    # Python start plus `import torch` alone takes longer than this.
    done = bench(tmp_path, "--presets", "ring-simple", "--timeout", "0.3")
    assert done.returncode == 1
    presets = by_name(json.loads((tmp_path / "out" / "result.json").read_text()))
    for name in ("default", "ring-simple"):
        assert presets[name]["status"] == "timeout"
        assert presets[name]["error"] == "ranks did not finish within 0.3 s (raise --timeout)"
        assert presets[name]["results"] == []
    assert "- default: timeout: ranks did not finish" in done.stdout
