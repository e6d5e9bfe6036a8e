"""The exporter's HTTP side, signals, and command-line errors, on the real process."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)

from tests.exporter.conftest import (
    Exporter,
    Metrics,
    StartExporter,
    clean_env,
    exporter_binary,
    free_port,
)

Line = Callable[..., str]
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture
def following(start_exporter: StartExporter, tmp_path: Path, line: Line) -> Exporter:
    """An exporter that has read two decode lines from a file."""
    log = tmp_path / "sglang.log"
    log.write_text(line(accept=2.15) + line(accept=2.27, throughput=108.5))
    exporter = start_exporter("--source", "file", "--file", str(log), "--from-beginning",
                              "--poll-interval", "0.05", "--draft-tokens", "4")
    exporter.wait_for(lambda m: m.decode == 2, "the two lines")
    return exporter


def test_metrics_is_prometheus_text_by_default(following: Exporter):
    response = following.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "# EOF" not in response.text
    assert "# HELP specserve_decode_accept_length " in response.text
    m = Metrics.parse(response.text)
    assert m.value("specserve_decode_last_gen_throughput_tokens_per_second") == 108.5
    assert m.value("specserve_speculative_draft_tokens") == 4
    assert m.value("specserve_decode_draft_acceptance_ratio") == pytest.approx((2.27 - 1) / 3)
    assert m.has("specserve_source_up", source="file")


def test_metrics_is_openmetrics_when_asked(following: Exporter):
    response = following.get("/metrics", headers={"Accept": OPENMETRICS})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith(OPENMETRICS)
    assert response.text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(response.text)}
    parsed = families["specserve_log_lines_parsed"]  # OpenMetrics: family name without _total
    assert parsed.type == "counter"
    decode = [s for s in parsed.samples if s.labels == {"kind": "decode"}
              and s.name == "specserve_log_lines_parsed_total"]
    assert [s.value for s in decode] == [2]
    assert families["specserve_decode_accept_length"].type == "histogram"


def test_healthz_reports_the_source(following: Exporter, tmp_path: Path):
    response = following.get("/healthz")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["status"] == "ok"
    source = body["source"]
    assert (source["kind"], source["state"]) == ("file", "following")
    assert source["detail"] == str(tmp_path / "sglang.log")
    assert source["reopens"] == 0
    assert isinstance(source["since"], float)


def test_unknown_path_is_404_and_index_links_endpoints(following: Exporter):
    missing = following.get("/metricz")
    assert missing.status_code == 404
    assert "/metrics" in missing.text
    index = following.get("/")
    assert index.status_code == 200
    assert 'href="/metrics"' in index.text and 'href="/healthz"' in index.text


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_exits_zero_within_five_seconds(following: Exporter, sig: int):
    code, took = following.stop(sig)
    assert code == 0, following.stderr()
    assert took < 5.0
    with pytest.raises(OSError):  # the port is closed
        socket.create_connection(("127.0.0.1", following.port), timeout=1).close()


def run_cli(
    *args: str, stdin: bytes = b"", timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [exporter_binary(), *args], input=stdin, capture_output=True, timeout=timeout,
        env=clean_env(), check=False,
    )
    return subprocess.CompletedProcess(
        completed.args, completed.returncode, completed.stdout.decode(),
        completed.stderr.decode(),
    )


BAD_FLAGS: dict[str, tuple[list[str], list[str]]] = {
    # case: (flags, what the message must name: the flag and the fix)
    "listen-not-host-port": (["--listen-address", "nonsense"],
                             ["--listen-address", "'nonsense'", "HOST:PORT", "127.0.0.1:9433"]),
    "listen-port-range": (["--listen-address", "127.0.0.1:70000"],
                          ["--listen-address", "0-65535"]),
    "baseline-unknown-bucket": (["--baseline", "1=90,3=170"],
                                ["--baseline", "'3'", "use one of 1, 2, 4, 8"]),
    "baseline-not-a-number": (["--baseline", "1=fast"], ["--baseline", "'fast'", "not a number"]),
    "draft-tokens": (["--draft-tokens", "0"], ["--draft-tokens", "at least 1"]),
    "poll-interval": (["--poll-interval", "0"], ["--poll-interval", "positive"]),
}


@pytest.mark.parametrize("case", list(BAD_FLAGS))
def test_bad_flag_exits_2_naming_flag_and_fix(tmp_path: Path, case: str):
    flags, expected = BAD_FLAGS[case]
    # A valid address first: a bad value that slipped through must not take the default port.
    result = run_cli("--listen-address", f"127.0.0.1:{free_port()}", "--source", "file",
                     "--file", str(tmp_path / "x.log"), *flags)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("specserve-exporter: error: ")
    for text in expected:
        assert text in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(("source", "extra", "expected"), [
    # --file has a default (specserve.logpath.LOG_FILE): only an empty one is missing.
    ("file", ["--file", ""], ["--file PATH"]),
    ("docker", [], ["--docker-container NAME"]),
    ("kubernetes", [], ["--k8s-pod NAME", "--k8s-selector"]),
])
def test_source_without_its_target_exits_2(source: str, extra: list[str], expected: list[str]):
    result = run_cli("--listen-address", f"127.0.0.1:{free_port()}", "--source", source, *extra)
    assert result.returncode == 2
    assert f"--source {source} needs" in result.stderr
    for text in expected:
        assert text in result.stderr


def test_unknown_source_is_an_argparse_error():
    result = run_cli("--source", "syslog")
    assert result.returncode == 2
    assert "--source" in result.stderr and "invalid choice" in result.stderr


def test_stdin_once_prints_metrics(line: Line, noise: Callable[..., str]):
    piped = (noise() + line(accept=2.15, running=1) + line(accept=3.0, running=3)
             + line(accept=1.0, running=3)).encode()
    result = run_cli("--source", "stdin", "--once", "--draft-tokens", "4",
                     "--baseline", "1=90,4=300", stdin=piped)
    assert result.returncode == 0, result.stderr
    m = Metrics.parse(result.stdout)
    assert m.decode == 3
    assert m.value("specserve_log_lines_ignored_total") == 1
    assert m.accept_count == 3
    assert m.accept_sum == pytest.approx(6.15)
    assert m.value("specserve_decode_last_accept_length") == 1.0  # the EAGLE-vs-EAGLE3 signature
    assert m.value("specserve_decode_draft_acceptance_ratio") == 0.0
    assert m.value("specserve_baseline_gen_throughput_tokens_per_second", concurrency="4") == 300
    # 1 running request -> bucket "1"; 3 -> bucket "4", next to the baseline it is compared with.
    assert m.value("specserve_decode_gen_throughput_tokens_per_second_count",
                   concurrency="4") == 2


def test_stdin_streams_lines_as_they_come(start_exporter: StartExporter, line: Line):
    exporter = start_exporter("--source", "stdin", stdin=subprocess.PIPE)
    pipe = exporter.proc.stdin
    assert pipe is not None
    pipe.write(line(accept=2.5).encode())
    pipe.flush()
    exporter.wait_for(lambda m: m.decode == 1 and m.up == 1, "the first piped line")
    pipe.write(line(accept=3.5).encode())
    pipe.close()
    m = exporter.wait_for(lambda m: m.decode == 2, "the second piped line")
    assert m.accept_sum == pytest.approx(6.0)
    # End of input: the source stops but the last values stay scrapable, and that is healthy.
    body = exporter.wait_state("stopped")
    assert body["status"] == "ok"
    assert exporter.metrics().up == 0


def test_once_on_a_missing_file_fails_clearly(tmp_path: Path):
    result = run_cli("--source", "file", "--file", str(tmp_path / "absent.log"), "--once")
    assert result.returncode == 1
    assert "absent.log does not exist" in result.stderr
    assert result.stdout == ""


def test_port_in_use_is_a_clear_error(tmp_path: Path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("--source", "file", "--file", str(tmp_path / "x.log"),
                         "--listen-address", f"127.0.0.1:{port}")
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Address already in use" in result.stderr
    assert "choose another --listen-address" in result.stderr
