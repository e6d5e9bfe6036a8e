"""`specserve verify --gpus-only`: the gate's GPU check alone, as the chart's init container runs
it in every server pod (docs/gpu-health.md, "The verify gate").

Exposition text and the local server are test_gate_gpus.py's: shaped as the pinned exporter
serves it, read through the same parser. Exit 0 for a healthy node, 1 for each refusal (the gate's
own words, naming the GPU and the fix), 1 for an exporter that stays unreadable past --dcgm-wait
(tried again meanwhile, never read as healthy), 2 for a usage error.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import requests

from specserve.cli import main
from specserve.verify import gpus
from specserve.verify.exporters import ScrapeError
from tests.verify.test_gate_gpus import KIMI, _serving, exposition

STANDIN = Path(__file__).resolve().parents[2] / "profiles" / "standin-cpu.yaml"


def _verify(url: str, *extra: str, profile: Path = KIMI) -> list[str]:
    return ["verify", "--gpus-only", f"--dcgm={url}", f"--profile={profile}", "--on=gpu-node-1",
            *extra]


def test_a_healthy_node_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with _serving(exposition()) as (url, asked):
        assert main(_verify(f"{url}/metrics")) == 0
    assert asked == ["/metrics"]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gpus: GPUs the DCGM exporter sees: 8 (need 8, the profile's")
    assert out[-1] == "GPU check passed on gpu-node-1: the GPUs report no error state"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (exposition(DCGM_FI_DEV_XID_ERRORS={5: 79}),
         "FAIL GPU 5 (GPU-5f2c-5) on gpu-node-1: last XID 79 (DCGM_FI_DEV_XID_ERRORS), a drain "
         "code (48, 63, 64, 74, 79, 92, 94, 95): reset the GPU or reboot (runbook "
         "spec-serve-gpu-xid-drain)"),
        (exposition(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL={1: 2}),
         "FAIL GPU 1 (GPU-5f2c-1) on gpu-node-1: 2 uncorrectable ECC errors since the driver "
         "loaded (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL): drain and reset the GPU"),
        (exposition(DCGM_FI_DEV_ROW_REMAP_FAILURE={6: 1}),
         "FAIL GPU 6 (GPU-5f2c-6) on gpu-node-1: a row remap failed "
         "(DCGM_FI_DEV_ROW_REMAP_FAILURE): the GPU needs service (RMA)"),
        (exposition(count=7),
         "FAIL GPUs the DCGM exporter sees: 7 (need 8, the profile's gpu.count; {url}): a GPU "
         "fell off the bus or the driver lost it (nvidia-smi -L, dmesg)"),
    ],
    ids=["xid-79", "uncorrectable-ecc", "row-remap-failure", "missing-gpu"],
)
def test_each_refusal_exits_1_with_the_gates_message(
    capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    with _serving(text) as (url, asked):
        # A refusal is not retried: the exporter answered, the node is faulty.
        assert main(_verify(f"{url}/metrics", "--dcgm-wait=30")) == 1
    assert asked == ["/metrics"]
    out = capsys.readouterr().out
    assert out.startswith("GPU check FAILED on gpu-node-1 (profile kimi-k2.5-int4-eagle3-8gpu):")
    assert f"  {message.format(url=f'{url}/metrics')}\n" in out
    assert "passed" not in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_exporter_is_tried_again_then_fails_naming_url_and_knob(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{_free_port()}/metrics"
    started = time.monotonic()
    assert main(_verify(url, "--dcgm-wait=2",
                        "--knob=dcgm_wait=dcgmExporter.gpuCheck.waitSeconds")) == 1
    assert time.monotonic() - started >= 2  # it waited the budget, not one try
    out = capsys.readouterr().out
    assert out.startswith("GPU check FAILED on gpu-node-1")
    assert f"the DCGM exporter {url} cannot be read" in out
    assert "still unreadable after 2 s and 2 tries (dcgmExporter.gpuCheck.waitSeconds)" in out
    assert "an unread exporter is not a healthy node" in out


def test_an_exporter_that_comes_up_within_the_wait_is_judged() -> None:
    # Refused twice (still starting), then it answers: judged on what it serves, on the clock
    # the budget runs on.
    calls: list[str] = []

    class Session:
        def get(self, url: str, timeout: float) -> _Response:
            calls.append(url)
            if len(calls) < 3:
                raise requests.ConnectionError("connection refused")
            return _Response(exposition(DCGM_FI_DEV_XID_ERRORS={2: 48}))

    now = [0.0]
    failed, _ = gpus.check_waiting(Session(), "http://x/metrics", 8, 60,  # type: ignore[arg-type]
                                   sleep=lambda s: now.__setitem__(0, now[0] + s),
                                   clock=lambda: now[0])
    assert len(calls) == 3 and now[0] == 10.0  # two 5 s polls, then the reading
    assert failed and "last XID 48" in failed[0]


class _Response:
    def __init__(self, text: str) -> None:
        self.text = text

    def raise_for_status(self) -> None:
        pass


def test_without_a_wait_one_failed_read_fails() -> None:
    with pytest.raises(ScrapeError, match="cannot be read") as caught:
        gpus.check_waiting(requests.Session(),
                           f"http://127.0.0.1:{_free_port()}/metrics", 8, 0)
    assert "still unreadable" not in str(caught.value)


def test_a_standin_profile_asks_for_no_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    # gpu.count 0: the count is not checked, but an exporter with no GPU at all still fails.
    with _serving(exposition(count=2)) as (url, _):
        assert main(_verify(f"{url}/metrics", profile=STANDIN)) == 0
    with _serving(exposition(count=0)) as (url, _):
        assert main(_verify(f"{url}/metrics", profile=STANDIN)) == 1
    assert "GPUs the DCGM exporter sees: none" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "--gpus-only", f"--profile={KIMI}"],  # no --dcgm
        ["verify", "--gpus-only", "--dcgm=http://127.0.0.1:9/metrics"],  # no --profile
        [*_verify("http://127.0.0.1:9/metrics"), "--server=http://127.0.0.1:9"],
        [*_verify("http://127.0.0.1:9/metrics"), "--no-exporter"],
        [*_verify("http://127.0.0.1:9/metrics"), "--dcgm-wait=-1"],
        ["verify", "--no-exporter", "--dcgm-wait=5"],  # the wait is only for --gpus-only
    ],
    ids=["no-dcgm", "no-profile", "server", "no-exporter", "negative-wait", "wait-without"],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("specserve verify: ")
