"""The gate's GPU check (`specserve verify --dcgm URL`) on dcgm-exporter exposition text.

The text is shaped as the pinned exporter serves it: every field its deployed counters file
enables (specserve.monitoring.dcgm, from the exporter's own default-counters.csv), with that
file's HELP and TYPE, the labels its GPU collector sets, the `label` fields as labels. It is read
through prometheus_client's parser as the gate reads it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from specserve.monitoring import dcgm
from specserve.monitoring.rules import DRAIN_XIDS
from specserve.profile.loader import load_profile
from specserve.verify import gate, gpus

REPO = Path(__file__).resolve().parents[2]
KIMI = REPO / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
_FIELD = re.compile(r"^(DCGM_FI_[A-Z0-9_]+)\s*,\s*(\w+)\s*,\s*(.*)$")


def exposition(count: int = 8, **faults: dict[int, float]) -> str:
    """The exporter's /metrics for `count` healthy GPUs; `faults[field] = {gpu: value}`."""
    fields = [m.groups() for line in dcgm.deployed_counters().splitlines()
              if (m := _FIELD.match(line.strip()))]  # fmt: skip
    driver = {"DCGM_FI_DRIVER_VERSION": "570.124.06"}
    out: list[str] = []
    for name, kind, help_text in fields:
        if kind == "label":
            continue
        out += [f"# HELP {name} {help_text.strip()}", f"# TYPE {name} {kind}"]
        for index in range(count):
            labels = {"gpu": str(index), "UUID": f"GPU-5f2c-{index}",
                      "pci_bus_id": f"00000000:{0x19 + index:02X}:00.0",
                      "device": f"nvidia{index}", "modelName": "NVIDIA H200",
                      "Hostname": "gpu-node-1", **driver}  # fmt: skip
            value = faults.get(name, {}).get(index, 60.0 if name.endswith("_TEMP") else 0.0)
            text = ",".join(f'{key}="{val}"' for key, val in labels.items())
            out.append(f"{name}{{{text}}} {value:g}")
    return "\n".join(out) + "\n"


def _judge(text: str, expected: int = 8) -> tuple[list[str], list[str]]:
    return gpus.judge(gpus.parse(text), expected, "http://127.0.0.1:9400/metrics")


def test_a_healthy_node_passes_and_says_what_it_read() -> None:
    failed, seen = _judge(exposition())
    assert failed == []
    assert seen[0].startswith("GPUs the DCGM exporter sees: 8 (need 8, the profile's gpu.count")
    assert "none on 8 GPUs" in seen[1] and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in seen[1]


def test_every_drain_xid_is_refused_and_an_application_fault_is_not() -> None:
    for code in DRAIN_XIDS:
        failed, _ = _judge(exposition(DCGM_FI_DEV_XID_ERRORS={3: code}))
        assert len(failed) == 1, (code, failed)
        assert failed[0].startswith(f"GPU 3 (GPU-5f2c-3) on gpu-node-1: last XID {code} ")
    for code in (13, 31, 43, 45):
        assert _judge(exposition(DCGM_FI_DEV_XID_ERRORS={3: code}))[0] == []


def test_uncorrectable_ecc_and_a_failed_remap_are_refused() -> None:
    failed, _ = _judge(exposition(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL={1: 2},
                                  DCGM_FI_DEV_ROW_REMAP_FAILURE={6: 1}))
    assert [line.split(":")[0] for line in failed] == [
        "GPU 1 (GPU-5f2c-1) on gpu-node-1", "GPU 6 (GPU-5f2c-6) on gpu-node-1"]
    assert "2 uncorrectable ECC errors" in failed[0] and "row remap failed" in failed[1]
    # Rows remapped in the past (and reset since) are the GPU working as designed: no refusal.
    assert _judge(exposition(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS={2: 3}))[0] == []


def test_a_missing_gpu_is_refused_against_the_profiles_count() -> None:
    failed, _ = _judge(exposition(count=7), expected=8)
    assert failed == ["GPUs the DCGM exporter sees: 7 (need 8, the profile's gpu.count; "
                      "http://127.0.0.1:9400/metrics): a GPU fell off the bus or the driver "
                      "lost it (nvidia-smi -L, dmesg)"]
    # The GPU index order is numeric, as nvidia-smi lists them.
    assert [g.index for g in gpus.parse(exposition(count=12))][-3:] == ["9", "10", "11"]


@contextmanager
def _serving(body: str) -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", asked
    finally:
        httpd.shutdown()
        httpd.server_close()


def _run(dcgm_url: str, server_url: str, exporter_url: str) -> tuple[bool, list[str]]:
    lines: list[str] = []
    s = gate.Settings(server=server_url, exporters=[exporter_url], profile=load_profile(KIMI),
                      dcgm=dcgm_url, request_timeout=2.0, on="gpu-node-1")
    return gate.run(s, lines.append), lines


def test_the_gate_refuses_a_faulty_node_before_any_request() -> None:
    with _serving(exposition(DCGM_FI_DEV_XID_ERRORS={5: 79})) as (dcgm_url, _), \
            _serving("") as (server_url, server_asked):
        ok, lines = _run(f"{dcgm_url}/metrics", server_url, f"{server_url}/metrics")
    assert not ok
    assert server_asked == []  # neither the server nor the exporter was asked anything
    report = "\n".join(lines)
    assert report.startswith("Verification gate FAILED on gpu-node-1")
    assert "FAIL GPU 5 (GPU-5f2c-5) on gpu-node-1: last XID 79" in report


def test_a_healthy_node_goes_on_to_the_server() -> None:
    with _serving(exposition()) as (dcgm_url, dcgm_asked), \
            _serving("") as (exporter_url, exporter_asked):
        # No specserve exporter there: the gate reads it next, after the GPUs, and stops.
        ok, lines = _run(f"{dcgm_url}/metrics", "http://127.0.0.1:9", f"{exporter_url}/metrics")
    assert not ok and dcgm_asked == ["/metrics"] and exporter_asked == ["/metrics"]
    assert lines[0].startswith("gpus: GPUs the DCGM exporter sees: 8 (need 8")
    assert lines[1].startswith("gpus: GPU error state: none on 8 GPUs")
    assert "not a specserve-exporter /metrics page" in lines[-1]


def test_an_unreadable_dcgm_exporter_fails_the_gate() -> None:
    ok, lines = _run("http://127.0.0.1:9/metrics", "http://127.0.0.1:9", "http://127.0.0.1:9")
    assert not ok and "the DCGM exporter http://127.0.0.1:9/metrics cannot be read" in lines[0]


def test_verify_takes_the_flag() -> None:
    from specserve.cli import build_parser

    args = build_parser(["verify"]).parse_args(
        ["verify", "--dcgm", "http://127.0.0.1:9400/metrics", "--no-exporter"])
    assert args.dcgm == "http://127.0.0.1:9400/metrics"
    assert requests  # the gate's HTTP client, imported for its exceptions by gpus.check
