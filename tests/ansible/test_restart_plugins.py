"""The restart's plugins without a Docker engine: the swap's sequence against a fake `docker`
(a state file) and a real shell, the follow plugin's background command and its progress, the
stability window's parts, the launch spec text. The same plugins run for real against the
engine in test_deploy.py, test_failure_matrix.py and test_teardown.py."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(relative: str) -> ModuleType:
    path = ROOT / "ansible" / "plugins" / relative
    spec = importlib.util.spec_from_file_location(f"_plugin_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


swap = _load("action/specserve_swap.py")
follow = _load("action/specserve_follow.py")
stability = _load("action/specserve_stability.py")
launch = _load("filter/specserve_launch.py")

# A `docker` that keeps its containers in a JSON file: the commands the swap runs, nothing more.
FAKE_DOCKER = r'''#!PYTHON
import json, os, sys
state_path = os.environ["FAKE_DOCKER_STATE"]
state = json.load(open(state_path))
log = open(state_path + ".log", "a")
log.write(" ".join(sys.argv[1:]) + "\n")
args = sys.argv[1:]

def find(ref):
    for cid, c in state.items():
        if cid == ref or c["name"] == ref:
            return cid, c
    sys.stderr.write(f"Error: No such object: {ref}\n")
    sys.exit(1)

def save():
    # Atomic, as the engine's own state is: the swap's background `docker stop` saves while its
    # wait inspects, and a reader of a half-written file would fail (CI, b7401b7+).
    with open(state_path + ".tmp", "w") as out:
        json.dump(state, out)
    os.replace(state_path + ".tmp", state_path)

cmd = args[0]
if cmd == "inspect":
    fmt, ref = args[2], args[3]
    cid, c = find(ref)
    if c.get("engine_down") and "{{.State.Pid}}" in fmt:  # the wait's inspect gets no answer
        sys.stderr.write("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                         "Is the docker daemon running?\n")
        sys.exit(1)
    out = (fmt.replace("{{.Id}}", cid).replace("{{.State.Status}}", c["status"])
           .replace("{{.State.StartedAt}}", c["started"]).replace("{{.State.Pid}}", str(c["pid"])))
    print(out)
    # Docker's restart policy: a container that exited on its own is started again a moment
    # later (here: right after it was seen), unless its policy was set to no or it was stopped.
    if c.get("pending_restart"):
        c["status"], c["pid"], c["pending_restart"] = "running", 11, False
        save()
elif cmd == "stop":
    cid, c = find(args[-1])
    c["status"], c["pid"], c["pending_restart"] = "exited", 0, False
    save()
elif cmd == "update":
    cid, c = find(args[-1])
    if c.get("update_refusals", 0) > 0:  # the engine while a crash-looping process exits
        c["update_refusals"] -= 1; save()
        print(f"Error response from daemon: Cannot update container {cid}: "
              "cannot update a stopped container: unknown")  # stdout: SSH with a TTY
        sys.stderr.write("Shared connection to localhost closed.\n")
        sys.exit(1)
    c["restart"] = "no"; c["pending_restart"] = False; save()
elif cmd == "rm":
    force = "-f" in args
    ref = args[-1]
    try:
        cid, c = find(ref)
    except SystemExit:
        sys.exit(1)
    del state[cid]; save()
elif cmd == "rename":
    cid, c = find(args[1])
    if any(o["name"] == args[2] for o in state.values()):
        sys.stderr.write("Error: name in use\n"); sys.exit(1)
    c["name"] = args[2]; save()
elif cmd == "start":
    cid, c = find(args[1])
    c["status"], c["pid"], c["started"] = "running", 4242, "2026-12-02T10:00:00Z"; save()
else:
    sys.stderr.write(f"fake docker: {args}\n"); sys.exit(2)
'''


@pytest.fixture
def host(tmp_path: Path) -> Iterator[dict[str, object]]:
    """A bin directory with the fake docker first on PATH, its state, a runner of shell commands."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER.replace("PYTHON", sys.executable))
    docker.chmod(0o755)
    state = tmp_path / "docker.json"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_DOCKER_STATE=str(state))

    def run(command: str) -> tuple[int, str, str]:
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env,
                              check=False, timeout=30)
        return proc.returncode, proc.stdout, proc.stderr

    yield {"run": run, "state": state, "bin": bin_dir, "tmp": tmp_path}


def _id(short: str) -> str:
    return short.ljust(64, "0")  # Docker's IDs are 64 hex digits; the swap prints 12


def _c(name: str, status: str) -> dict[str, object]:
    """A fake container: running (a PID), exited (stopped) or created (never started)."""
    started = {"running": "2026-12-01T00:00:00Z", "exited": "2026-11-30T00:00:00Z",
               "created": "0001-01-01T00:00:00Z"}[status]
    return {"name": name, "status": status, "pid": 10 if status == "running" else 0,
            "started": started}


def _containers(state: Path, **containers: dict[str, object]) -> None:
    state.write_text(json.dumps({_id(k): v for k, v in containers.items()}))


def _names(state: Path) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in json.loads(state.read_text()).values()}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _args(port: int, **extra: object) -> dict[str, object]:
    return {"name": "srv", "keep": 2, "stop_timeout": 5, "drain_timeout": 5, "poll": 0.05,
            "port_host": "127.0.0.1", "port": port, "port_close_timeout": 1,
            "python": sys.executable, **extra}


def test_swap_stops_keeps_installs_and_starts_in_order(host: dict, tmp_path: Path) -> None:
    _containers(host["state"],
                old1=_c("srv", "running"), prev1=_c("srv-prev-1", "exited"),
                new1=_c("srv-next", "created"))
    staged, live = tmp_path / "staged.yaml", tmp_path / "live.yaml"
    staged.write_text("new: profile\n")
    live.write_text("old: profile\n")
    said: list[str] = []
    if os.geteuid() != 0:  # the install chowns to root, as the role runs it (become)
        pytest.fail("the swap installs the profile as root: run the tests as root (CI does)")
    result = swap.Swap(host["run"], _args(_free_port(), next="srv-next", profile_src=staged,
                                          profile_dest=live), said.append)()
    names = _names(host["state"])
    assert names["srv"]["status"] == "running" and "srv-next" not in names
    assert names["srv-prev-1"]["restart"] == "no"
    assert names["srv-prev-2"]["started"].startswith("2026-11-30")
    assert result["old_id"] == _id("old1") and result["started_id"] == _id("new1")
    assert live.read_text() == "new: profile\n" and oct(live.stat().st_mode & 0o777) == "0o644"
    log = Path(str(host["state"]) + ".log").read_text().splitlines()
    order = [next(i for i, line in enumerate(log) if line.startswith(word))
             for word in ("update", "stop", "rename srv-prev-1 srv-prev-2",
                          f"rename {_id('old1')}", "rename srv-next srv", "start srv")]
    assert order == sorted(order), log
    text = "\n".join(said)
    assert "stopping the old server old100000000 (running): docker stop --time 5" in text
    assert "(pid, status): " in text and "0 exited (done)" in text
    assert "kept as srv-prev-1 (docker logs srv-prev-1)" in text
    assert f"profile {live} installed from {staged}" in text
    assert "started srv (new100000000, prepared as srv-next)" in text


def test_swap_removes_a_container_that_never_started(host: dict) -> None:
    # A killed play can leave the prepared container under the live name, never started: it is
    # not kept as a predecessor (it has no logs, it never served).
    _containers(host["state"],
                new0=_c("srv", "created"), new1=_c("srv-next", "created"))
    said: list[str] = []
    swap.Swap(host["run"], _args(_free_port(), next="srv-next"), said.append)()
    assert set(_names(host["state"])) == {"srv"}
    assert "removed new000000000" in said, said


def test_swap_keeps_a_crashed_container_stopped_though_docker_would_restart_it(
        host: dict) -> None:
    # A rank that exited on its own when its group broke, with a restart Docker has scheduled:
    # kept as <name>-prev-1, it must stay stopped (a first multi-node deploy leaves no rank
    # running). Before, the swap saw "exited", did not stop it and kept it, and Docker started it.
    crashed = {**_c("srv", "exited"), "pending_restart": True}
    _containers(host["state"], old1=crashed)
    said: list[str] = []
    swap.Swap(host["run"], _args(_free_port()), said.append)()
    kept = _names(host["state"])["srv-prev-1"]
    assert kept["status"] == "exited" and kept["pid"] == 0 and kept["restart"] == "no", kept
    assert "stopping the old server old100000000 (exited)" in "\n".join(said)


def test_swap_tries_the_restart_policy_again_while_the_engine_refuses_it(
        host: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Docker refuses `update` while a crash-looping container's process exits (CI, bda968e: a
    rollback failed at "docker update --restart=no failed (exit 1): Shared connection to
    localhost closed", the engine's reason hidden on stdout). The swap tries again; when the
    engine never gives in, the failure quotes the engine's own words."""
    monkeypatch.setattr(swap, "UPDATE_RETRY_S", 0.01)
    crashed = {**_c("srv", "exited"), "pending_restart": True, "update_refusals": 3}
    _containers(host["state"], old1=crashed, new1=_c("srv-next", "created"))
    said: list[str] = []
    swap.Swap(host["run"], _args(_free_port(), next="srv-next"), said.append)()
    names = _names(host["state"])
    assert names["srv-prev-1"]["restart"] == "no" and names["srv-prev-1"]["pid"] == 0, names
    assert names["srv"]["status"] == "running", names
    assert "\n".join(said).count("refused (Shared connection to localhost closed. / Error "
                                  "response from daemon") == 3, said

    _containers(host["state"], old1={**_c("srv", "running"), "update_refusals": 99},
                new1=_c("srv-next", "created"))
    with pytest.raises(swap.AnsibleActionFail) as failed:
        swap.Swap(host["run"], _args(_free_port(), next="srv-next"), lambda _: None)()
    assert f", {swap.UPDATE_TRIES} tries" in str(failed.value)
    assert "cannot update a stopped container" in str(failed.value)
    names = _names(host["state"])
    assert names["srv"]["status"] == "running" and names["srv-next"]["status"] == "created"


def test_swap_does_not_take_an_unanswered_inspect_for_a_gone_server(host: dict) -> None:
    """The engine not answering while the old server stops: nothing is known, so the swap waits
    and fails naming what it saw, never starting a second server on top of a live one (an
    inspect failure used to read as "0 removed")."""
    _containers(host["state"], old1={**_c("srv", "running"), "engine_down": True},
                new1=_c("srv-next", "created"))
    said: list[str] = []
    with pytest.raises(swap.AnsibleActionFail, match="server_stop_timeout") as failed:
        swap.Swap(host["run"], _args(_free_port(), next="srv-next", stop_timeout=0,
                                     drain_timeout=0.5), said.append)()
    assert "unknown (docker inspect: Cannot connect to the Docker daemon" in str(failed.value)
    assert "(done)" not in "\n".join(said)
    names = _names(host["state"])
    assert names["srv-next"]["status"] == "created" and "srv-prev-1" not in names, names


def test_swap_stop_only_and_keep_zero(host: dict) -> None:
    _containers(host["state"], old1=_c("srv", "running"))
    result = swap.Swap(host["run"], _args(_free_port(), keep=0), lambda _: None)()
    assert _names(host["state"]) == {} and result["started_id"] == ""


def test_swap_refuses_to_start_while_the_port_is_held(host: dict) -> None:
    _containers(host["state"], new1=_c("srv-next", "created"))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(swap.AnsibleActionFail, match="server_port_close_timeout_s") as failed:
            swap.Swap(host["run"], _args(port, next="srv-next"), lambda _: None)()
    assert f"ss -ltnp sport = :{port}" in str(failed.value)
    assert _names(host["state"])["srv-next"]["status"] == "created"  # nothing started


def test_swap_waits_for_the_gpus_and_names_the_knob(host: dict) -> None:
    smi = host["bin"] / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 405\n")
    smi.chmod(0o755)
    _containers(host["state"])
    with pytest.raises(swap.AnsibleActionFail, match="server_drain_timeout_s") as failed:
        swap.Swap(host["run"], _args(_free_port(), gpu=True, drain_timeout=0.3),
                  lambda _: None)()
    assert "still 405" in str(failed.value) and "out of GPU memory" in str(failed.value)


def _local_run(command: str) -> tuple[int, str, str]:
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_follow_prints_lines_while_the_command_runs() -> None:
    said: list[tuple[float, str]] = []
    begin = time.monotonic()
    script = "for i in 1 2 3; do echo out $i; echo err $i >&2; sleep 0.4; done; exit 3"
    result = follow.Follow(_local_run, lambda line: said.append((time.monotonic(), line)),
                           ["sh", "-c", script], 0.1, 60, 0, "all")()
    assert result["rc"] == 3 and result["failed"]
    assert result["stdout_lines"] == ["out 1", "out 2", "out 3"]
    assert result["stderr_lines"] == ["err 1", "err 2", "err 3"]
    first = next(t for t, line in said if line == "out 1")
    assert first - begin < 0.8, said  # printed while it ran, not at its end (1.2 s)
    stderr_only: list[str] = []
    follow.Follow(_local_run, stderr_only.append, ["sh", "-c", script], 0.1, 60, 0, "stderr")()
    assert stderr_only == ["err 1", "err 2", "err 3"]


def test_follow_heartbeat_and_timeout_stop_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    said: list[str] = []
    script = f"sleep 2; touch {marker}"
    result = follow.Follow(_local_run, said.append, ["sh", "-c", script], 0.1, 0.3, 0.8, "all")()
    assert result["rc"] == 124 and result["timed_out"]
    assert "still running after 1 s" in result["msg"]
    assert any(line.startswith("running, ") for line in said), said
    time.sleep(2)
    assert not marker.exists(), "the timed-out command's process group was not stopped"


@pytest.mark.parametrize(("window", "part", "expected"), [
    (60, 10, [10.0] * 6), (3, 10, [3.0]), (18, 10, [9.0, 9.0]), (25, 10, [25 / 3] * 3),
    (0, 10, [0.0]),
])
def test_stability_window_parts(window: float, part: float, expected: list[float]) -> None:
    assert stability.parts(window, part) == pytest.approx(expected)
    assert sum(stability.parts(window, part)) == pytest.approx(window)


DRY_RUN = """specserve-launch: profile standin-cpu, running:
specserve-launch: flags for SGLang 0.5.21 ($SPECSERVE_SGLANG_VERSION)
env \\
  NCCL_P2P_DISABLE=1 \\
  specserve-standin \\
  --model-path /models/x \\
  --enable-metrics \\
  --api-key "$(cat /run/secrets/specserve/api-key)"
specserve-launch: the server's own parser accepts it
"""


def test_launch_spec_is_one_line_per_setting_and_argument() -> None:
    spec = {"image": "img:1", "profile_sha256": "ab", "secret_sha256": "cd",
            "env": {"B": "2", "A": "1"}, "volumes": ["/a:/b:ro"], "ulimits": [], "gpus": 0,
            "command": ["--node-rank", "1"], "zz_new": "x"}
    text = launch.launch_spec(spec, "srv", "sha256:123", DRY_RUN)
    lines = text.splitlines()
    assert lines[2:6] == ["image: img:1", "image id: sha256:123", "profile sha256: ab",
                          "api key sha256: cd"]
    assert "env: A=1" in lines and lines.index("env: A=1") < lines.index("env: B=2")
    assert "launcher argument: --node-rank" in lines and "ulimit: (none)" in lines
    assert lines[-8] == "zz new: x"
    assert lines[-7] == "command (flags for SGLang 0.5.21 ($SPECSERVE_SGLANG_VERSION)):"
    assert lines[-6:] == ["  env", "  NCCL_P2P_DISABLE=1", "  specserve-standin",
                          "  --model-path /models/x", "  --enable-metrics",
                          '  --api-key "$(cat /run/secrets/specserve/api-key)"', ]
    assert "not rendered" in launch.launch_spec(spec, "srv", "", "")
    assert "pulled by the deploy" in launch.launch_spec(spec, "srv", "", "")
