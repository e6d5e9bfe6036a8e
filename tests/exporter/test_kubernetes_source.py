"""--source kubernetes against k8s_standin.py, a stand-in for the Kubernetes API server that
serves the documented pod-list and pod-log endpoints (no Kubernetes API server can run here).

The exporter talks to it through the official kubernetes client and a kubeconfig written by the
test (plain HTTP on 127.0.0.1, no credentials). Each decode line carries a distinct accept length,
so the histogram's count and sum show which windows were counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.exporter.conftest import Exporter, Metrics, StartExporter
from tests.exporter.k8s_standin import KubeApiStandIn

Line = Callable[..., str]
LABEL = "app.kubernetes.io/name=specserve"


@pytest.fixture
def api() -> Iterator[KubeApiStandIn]:
    with KubeApiStandIn() as standin:
        yield standin


@pytest.fixture
def kubeconfig(api: KubeApiStandIn, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig")


def windows(line: Line, start: int, count: int) -> tuple[str, float]:
    values = [round(1 + (start + i) / 100, 2) for i in range(count)]
    return "".join(line(accept=v) for v in values), sum(values)


def counted(n: int, total: float) -> Callable[[Metrics], bool]:
    return lambda m: m.accept_count == n and m.accept_sum == pytest.approx(total)


def follow(start_exporter: StartExporter, kubeconfig: Path, *extra: str) -> Exporter:
    return start_exporter("--source", "kubernetes", "--kubeconfig", str(kubeconfig), *extra)


def still(exporter: Exporter, n: int, total: float, seconds: float = 1.5) -> None:
    """Past the source's 1 s reconnect interval nothing more may arrive."""
    time.sleep(seconds)
    m = exporter.metrics()
    assert (m.decode, m.accept_count) == (n, n)
    assert m.accept_sum == pytest.approx(total)


def test_follows_pod_by_name_from_the_end(
    start_exporter: StartExporter, api: KubeApiStandIn, kubeconfig: Path, line: Line
):
    api.add_pod("sglang-0")
    old, _ = windows(line, 0, 2)
    api.log("sglang-0", old)
    exporter = follow(start_exporter, kubeconfig, "--k8s-pod", "sglang-0",
                      "--k8s-container", "sglang")
    body = exporter.wait_state("following")
    assert body["source"]["detail"] == "pod default/sglang-0"
    request = api.log_requests[0]
    assert request.params == {"container": "sglang", "follow": "true", "timestamps": "true",
                              "tailLines": "0"}
    assert request.sent == []
    new, total = windows(line, 10, 3)
    api.log("sglang-0", new)
    # A kubelet stamp at a whole second has no fraction at all in Go's RFC3339Nano.
    whole_second = (time.time_ns() // 1_000_000_000 + 1) * 1_000_000_000
    api.log("sglang-0", line(accept=5.5), at_ns=whole_second)
    m = exporter.wait_for(counted(4, total + 5.5), "the 4 lines logged after the start")
    assert m.read == 4  # stamps stripped, nothing old
    assert m.value("specserve_decode_last_accept_length") == pytest.approx(5.5)
    assert m.up == 1
    still(exporter, 4, total + 5.5, seconds=0.3)


def test_selector_follows_the_running_matching_pod(
    start_exporter: StartExporter, api: KubeApiStandIn, kubeconfig: Path, line: Line
):
    api.add_pod("sglang-pending", namespace="serving", labels={"app.kubernetes.io/name":
                                                               "specserve"}, phase="Pending")
    api.add_pod("other", namespace="serving", labels={"app.kubernetes.io/name": "other"})
    api.add_pod("sglang-abc", namespace="serving",
                labels={"app.kubernetes.io/name": "specserve", "tier": "gpu"},
                containers=("sglang", "sidecar"))
    exporter = follow(start_exporter, kubeconfig, "--k8s-selector", LABEL, "--k8s-namespace",
                      "serving", "--k8s-container", "sglang")
    body = exporter.wait_state("following")
    assert body["source"]["detail"] == "pod serving/sglang-abc"
    assert api.list_requests[0]["labelSelector"] == LABEL
    text, total = windows(line, 0, 3)
    for pod in ("sglang-pending", "other"):
        api.log(pod, line(accept=7.77), namespace="serving")
    api.log("sglang-abc", line(accept=7.77), container="sidecar", namespace="serving")
    api.log("sglang-abc", text, namespace="serving")
    exporter.wait_for(counted(3, total), "only the matching running pod's 3 lines")
    still(exporter, 3, total, seconds=0.3)


def test_container_restart_resumes_without_double_counting(
    start_exporter: StartExporter, api: KubeApiStandIn, kubeconfig: Path, line: Line
):
    api.add_pod("sglang-0")
    first, s1 = windows(line, 0, 3)
    api.log("sglang-0", first)
    exporter = follow(start_exporter, kubeconfig, "--k8s-pod", "sglang-0", "--from-beginning")
    exporter.wait_for(counted(3, s1), "the first instance's 3 lines")
    assert "tailLines" not in api.log_requests[0].params
    api.restart_container("sglang-0")
    second, s2 = windows(line, 10, 3)
    api.log("sglang-0", second)
    m = exporter.wait_for(counted(6, s1 + s2), "the restarted container's 3 lines")
    assert m.reopens >= 1
    resumed = api.log_requests[1]
    assert int(resumed.params["sinceSeconds"]) >= 1
    # The stand-in sent some already-counted lines again: they were dropped by timestamp.
    assert set(resumed.sent) & set(first.encode().splitlines())
    still(exporter, 6, s1 + s2)


def test_stream_end_before_any_new_line_does_not_replay_history(
    start_exporter: StartExporter, api: KubeApiStandIn, kubeconfig: Path, line: Line
):
    """Started at the end, the API server ends the stream (e.g. its idle timeout) before the
    server printed anything new: the reconnect must not read the old history after all."""
    api.add_pod("sglang-0")
    old, _ = windows(line, 0, 3)
    api.log("sglang-0", old)
    exporter = follow(start_exporter, kubeconfig, "--k8s-pod", "sglang-0")
    exporter.wait_state("following")
    api.end_streams("sglang-0")
    exporter.wait_until(lambda: len(api.log_requests) >= 2, "the reconnect")
    new, total = windows(line, 10, 2)
    api.log("sglang-0", new)
    exporter.wait_for(counted(2, total), "the 2 new lines only")
    still(exporter, 2, total)


def test_pod_replaced_under_the_same_selector(
    start_exporter: StartExporter, api: KubeApiStandIn, kubeconfig: Path, line: Line
):
    exporter = follow(start_exporter, kubeconfig, "--k8s-selector", LABEL)
    body = exporter.wait_state("waiting")
    assert LABEL in body["source"]["detail"]
    assert exporter.metrics().up == 0
    # Appears after the start: new output, read from its first line even if printed before
    # the exporter's next look.
    api.add_pod("sglang-a", labels={"app.kubernetes.io/name": "specserve"},
                created=time.time() - 60)
    first, s1 = windows(line, 0, 2)
    api.log("sglang-a", first)
    exporter.wait_for(counted(2, s1), "the first pod's lines", timeout=6)
    # A rollout (Recreate): the old pod goes, a new one under a new name comes.
    api.delete_pod("sglang-a")
    api.add_pod("sglang-b", labels={"app.kubernetes.io/name": "specserve"})
    second, s2 = windows(line, 10, 3)
    api.log("sglang-b", second)
    m = exporter.wait_for(counted(5, s1 + s2), "the replacement pod's lines", timeout=6)
    assert m.up == 1
    assert m.reopens >= 1
    assert exporter.healthz()[1]["source"]["detail"] == "pod default/sglang-b"


def test_rbac_denial_is_an_error_naming_the_fix(
    start_exporter: StartExporter, api: KubeApiStandIn, kubeconfig: Path
):
    api.forbidden_namespaces.add("locked")
    exporter = follow(start_exporter, kubeconfig, "--k8s-selector", LABEL,
                      "--k8s-namespace", "locked")
    exporter.wait_state("error")
    status, body = exporter.healthz()
    assert status == 503
    detail = body["source"]["detail"]
    assert "403" in detail
    assert "pods/log" in detail  # what the service account's Role must grant
    assert exporter.metrics().up == 0
