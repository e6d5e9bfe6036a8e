import sys
import time

from specserve.nccl import runner
from specserve.nccl.runner import free_port, run_ranks, worker_env


def test_worker_env_strips_inherited_nccl_and_applies_preset_last():
    base = {"PATH": "/bin", "NCCL_PROTO": "LL128", "NCCL_DEBUG": "INFO", "RANK": "7"}
    env = worker_env(base, {"NCCL_ALGO": "Ring"}, {"NCCL_DEBUG": "WARN", "X": "1"}, 1, 4, 2222)
    assert {k: v for k, v in env.items() if k.startswith("NCCL_")} == {
        "NCCL_ALGO": "Ring",
        "NCCL_DEBUG": "WARN",
    }
    assert env["X"] == "1" and env["PATH"] == "/bin"
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == ("1", "1", "4")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "2222")
    assert "NCCL_PROTO" not in worker_env(base, {}, {}, 0, 2, 1)


def test_free_port_is_bindable_on_loopback():
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def _py(code):
    return [sys.executable, "-c", code]


def test_all_ranks_succeed(tmp_path):
    status, procs = run_ranks(_py("pass"), [{}, {}], tmp_path, timeout_s=30)
    assert status == "ok"
    assert [p.popen.returncode for p in procs] == [0, 0]


def test_timeout_kills_every_rank(tmp_path):
    started = time.monotonic()
    status, procs = run_ranks(_py("import time; time.sleep(60)"), [{}, {}], tmp_path, 1.0)
    assert status == "timeout"
    assert time.monotonic() - started < 15
    assert all(p.popen.returncode is not None and p.popen.returncode < 0 for p in procs)


def test_one_failed_rank_stops_the_hanging_peer_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "PEER_GRACE_S", 0.5)
    code = "import os, sys, time\nif os.environ['R'] == '1': sys.exit(3)\ntime.sleep(60)"
    started = time.monotonic()
    status, procs = run_ranks(_py(code), [{"R": "0"}, {"R": "1"}], tmp_path, 60)
    assert status == "failed"
    assert time.monotonic() - started < 15
    assert procs[1].popen.returncode == 3
    assert procs[0].popen.returncode < 0
    assert "rank 1 exited with status 3" in runner._first_error(procs)
