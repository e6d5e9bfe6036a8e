"""--source docker against the real Docker Engine: a container prints SGLang decode lines.

The container prints the lines of its first run, and after a restart those of its second run
(it keeps a run counter in its own file system, which survives `docker restart`), then sleeps.
Every line has its own accept length, so the accept-length histogram's count and sum say
exactly which windows were counted: a restart must add the second run and nothing else.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.exporter.conftest import Exporter, Metrics, StartExporter

pytestmark = pytest.mark.docker

IMAGE = "specserve-local/bookworm-python:3.11"  # built by scripts/setup/base-image.sh
Line = Callable[..., str]

# PID 1 of the container: print this run's lines (one every 20 ms, as a server would), then idle.
# `docker restart` keeps the container's file system, so /tmp/runs counts the runs.
CONTAINER_SCRIPT = """
import os, time
path = "/tmp/runs"
run = (int(open(path).read()) if os.path.exists(path) else 0) + 1
open(path, "w").write(str(run))
for text in os.environ.get(f"RUN{run}_LINES", "").splitlines():
    print(text, flush=True)
    time.sleep(0.02)
time.sleep(3600)
"""


def docker(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


@pytest.fixture(scope="module", autouse=True)
def docker_engine() -> None:
    try:
        info = docker("info", "--format", "{{.ServerVersion}}", check=False, timeout=20)
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"no Docker engine: `docker info` failed ({exc})")
    if info.returncode != 0:
        pytest.skip(f"no Docker engine: `docker info` failed: {info.stderr.strip()}")
    image = docker("image", "inspect", IMAGE, check=False)
    # Not a skip: CI builds this image before the tests, and nothing can be pulled here.
    assert image.returncode == 0, f"{IMAGE} is missing: run scripts/setup/base-image.sh"


def windows(line: Line, run: int, count: int) -> tuple[str, float]:
    """`count` lines of run `run` with distinct accept lengths; their text and sum."""
    values = [round(run + 1 + i / 100, 2) for i in range(count)]
    return "".join(line(accept=v, running=run) for v in values), sum(values)


class Containers:
    """Containers made by one test, each under a unique name; all removed at teardown."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def new_name(self) -> str:
        name = f"specserve-test-{uuid.uuid4().hex[:10]}"
        self.names.append(name)
        return name

    def run(self, name: str, **runs: str) -> str:
        env = [item for key, text in runs.items() for item in ("-e", f"{key.upper()}_LINES={text}")]
        started = docker(
            "run", "-d", "--network", "host", "--name", name, *env, IMAGE,
            "python3", "-c", CONTAINER_SCRIPT,
        )
        return started.stdout.strip()

    def printed(self, name: str) -> int:
        """Decode lines in the container's log so far, as the engine stores them."""
        logs = docker("logs", name)
        return (logs.stdout + logs.stderr).count("Decode batch")

    def wait_printed(self, name: str, count: int, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while self.printed(name) < count:
            assert time.monotonic() < deadline, f"{name} did not print {count} lines"
            time.sleep(0.1)

    def print_line(self, name: str, text: str) -> None:
        """Write to PID 1's stdout from outside: the line lands in the container's log."""
        docker("exec", name, "sh", "-c", 'printf "%s" "$1" > /proc/1/fd/1', "sh", text)

    def remove_all(self) -> None:
        for name in self.names:
            docker("rm", "-f", name, check=False)


@pytest.fixture
def containers() -> Iterator[Containers]:
    made = Containers()
    yield made
    made.remove_all()


def follow(start_exporter: StartExporter, name: str, *extra: str) -> Exporter:
    return start_exporter("--source", "docker", "--docker-container", name, *extra)


def counted(n: int, total: float) -> Callable[[Metrics], bool]:
    return lambda m: m.accept_count == n and m.accept_sum == pytest.approx(total)


def still(exporter: Exporter, n: int, total: float, seconds: float = 1.5) -> None:
    """Past the source's 1 s reconnect interval nothing more may arrive."""
    time.sleep(seconds)
    m = exporter.metrics()
    assert (m.decode, m.accept_count) == (n, n)
    assert m.accept_sum == pytest.approx(total)


def test_restart_counts_each_window_once(
    start_exporter: StartExporter, containers: Containers, line: Line
):
    name = containers.new_name()
    run1, s1 = windows(line, 1, 4)
    run2, s2 = windows(line, 2, 4)
    containers.run(name, run1=run1, run2=run2)
    exporter = follow(start_exporter, name, "--from-beginning")
    m = exporter.wait_for(counted(4, s1), "the first run's 4 lines", timeout=10)
    assert m.up == 1
    assert m.reopens == 0
    docker("restart", "--time", "0", name)
    # Docker replays the first run's lines on every reconnect unless asked for `since`.
    m = exporter.wait_for(counted(8, s1 + s2), "the second run's 4 lines", timeout=10)
    assert m.reopens >= 1
    assert m.value("specserve_decode_running_requests") == 2  # the last window: run 2
    still(exporter, 8, s1 + s2)
    containers.print_line(name, line(accept=7.5, running=2))
    exporter.wait_for(counted(9, s1 + s2 + 7.5), "a line printed after the restart")
    assert exporter.state() == "following"


def test_starts_at_end_and_a_restart_does_not_replay_history(
    start_exporter: StartExporter, containers: Containers, line: Line
):
    name = containers.new_name()
    run1, _ = windows(line, 1, 3)
    run2, s2 = windows(line, 2, 2)
    containers.run(name, run1=run1, run2=run2)
    containers.wait_printed(name, 3)
    exporter = follow(start_exporter, name)
    exporter.wait_state("following")
    still(exporter, 0, 0.0, seconds=0.5)
    # No line came between the start and the restart: the reconnect must still skip the
    # history that was there when the exporter started.
    docker("restart", "--time", "0", name)
    exporter.wait_for(counted(2, s2), "the second run's 2 lines only", timeout=10)
    still(exporter, 2, s2)


def test_recreated_container_with_same_name_is_followed(
    start_exporter: StartExporter, containers: Containers, line: Line
):
    name = containers.new_name()
    first, s1 = windows(line, 1, 2)
    old_id = containers.run(name, run1=first)
    exporter = follow(start_exporter, name, "--from-beginning")
    exporter.wait_for(counted(2, s1), "the first container's lines", timeout=10)
    assert old_id.startswith(_short_id(exporter))
    docker("rm", "-f", name)
    exporter.wait_state("waiting", timeout=10)
    assert exporter.metrics().up == 0
    second, s2 = windows(line, 3, 3)
    new_id = containers.run(name, run1=second)  # a new container: its own run 1
    m = exporter.wait_for(counted(5, s1 + s2), "the new container's lines", timeout=10)
    assert m.up == 1
    assert m.reopens >= 1
    assert new_id.startswith(_short_id(exporter))
    still(exporter, 5, s1 + s2)


def _short_id(exporter: Exporter) -> str:
    detail: str = exporter.healthz()[1]["source"]["detail"]  # "container NAME (SHORT_ID)"
    return detail.rsplit("(", 1)[-1].rstrip(")")


def test_absent_at_start_then_followed_from_its_first_line(
    start_exporter: StartExporter, containers: Containers, line: Line
):
    name = containers.new_name()
    exporter = follow(start_exporter, name)
    exporter.wait_state("waiting")
    status, body = exporter.healthz()
    assert status == 200  # waiting for a container is normal during a deploy
    assert f"container {name} not found" in body["source"]["detail"]
    assert exporter.metrics().up == 0
    run1, s1 = windows(line, 1, 3)
    containers.run(name, run1=run1)
    # A container that appears after the start is new output: all of it counts, including
    # what it printed before the exporter's next look.
    m = exporter.wait_for(counted(3, s1), "the new container's 3 lines", timeout=10)
    assert m.up == 1
    assert exporter.state() == "following"
