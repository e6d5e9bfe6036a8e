"""The stand-in over several nodes: what each SGLang rank does, simulated on a CPU.

SGLang (0.5.21 and 0.5.23, `entrypoints/engine.py`, `entrypoints/http_server.py`,
`utils/common.py` launch_dummy_health_check_server): every rank joins the torch.distributed
rendezvous at `--dist-init-addr` (rank 0 holds it) before it loads anything, and waits there for
the whole group (`--dist-timeout`); rank 0 then runs the tokenizer and the HTTP API; a rank > 0
runs only its schedulers and, once they are up, a dummy health server on `--host:--port` whose
`/ping`, `/health` and `/health_generate` answer 200 (and `/metrics` with `--enable-metrics`).
One lost rank breaks the group's NCCL communicators, so the others fail too.

The stand-in keeps exactly that shape with a plain TCP rendezvous (it is not torch's protocol):
rank 0 listens at the rendezvous port and waits for `nnodes - 1` ranks; each rank > 0 connects
(retrying until the timeout), sends its rank, and keeps the connection. A closed connection on
either side is a lost peer: the process exits 1, as a rank whose collective failed does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from specserve.standin import STANDIN_NAME
from specserve.standin.args import StandinArgs
from specserve.standin.logfmt import LinePrinter

# torch.distributed's default process-group timeout is 10 minutes for NCCL; the stand-in uses
# --dist-timeout when given, like SGLang, else this.
DEFAULT_TIMEOUT_S = 600.0
RETRY_S = 0.2
SHUTDOWN = b"shutdown\n"


class RendezvousError(Exception):
    """The group could not be formed; the message says which rank waited for what."""


@dataclass
class Group:
    """A formed group: the connections to the peers and an event set when one is lost."""

    rank: int
    size: int
    peers: list[socket.socket] = field(default_factory=list)
    lost: threading.Event = field(default_factory=threading.Event)
    # Rank 0's orderly stop (SGLang broadcasts a ShutdownReq to every rank): not a lost peer.
    shutdown: threading.Event = field(default_factory=threading.Event)
    reason: str = ""

    def close(self, orderly: bool = False) -> None:
        if orderly:
            self.shutdown.set()
        for peer in self.peers:
            if orderly:
                with contextlib.suppress(OSError):
                    peer.sendall(SHUTDOWN)
            with contextlib.suppress(OSError):
                peer.close()


def placement(args: StandinArgs) -> tuple[int, int, str, int] | None:
    """(nnodes, node_rank, host, port) of a multi-node launch, None for one node."""
    nnodes = int(args.resolved.get("nnodes") or 1)
    if nnodes == 1:
        return None
    address = str(args.resolved.get("dist_init_addr") or "")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise RendezvousError(
            f"--nnodes {nnodes} needs --dist-init-addr HOST:PORT (rank 0's rendezvous), got "
            f"{address!r}"
        )
    return nnodes, int(args.resolved.get("node_rank") or 0), host.strip("[]"), int(port)


def _timeout(args: StandinArgs) -> float:
    value = args.resolved.get("dist_timeout")
    return float(value) if value else DEFAULT_TIMEOUT_S


def _watch(group: Group, peer: socket.socket, name: str, printer: LinePrinter) -> None:
    def run() -> None:
        seen = b""
        try:
            while chunk := peer.recv(64):
                seen += chunk
                if SHUTDOWN in seen:
                    group.shutdown.set()
                    return
        except OSError:
            pass
        if not group.lost.is_set() and not group.shutdown.is_set():
            group.reason = f"lost {name}: its connection closed"
            printer.log(f"{STANDIN_NAME}: rank {group.rank}: {group.reason}", ranks=False)
            group.lost.set()

    threading.Thread(target=run, name=f"standin-peer-{name}", daemon=True).start()


def _hold(
    host: str, port: int, size: int, deadline: float, stop: threading.Event
) -> list[socket.socket]:
    """Rank 0: accept `size - 1` ranks at host:port before the deadline."""
    listener = socket.create_server((host, port), reuse_port=False)
    listener.settimeout(RETRY_S)
    peers: list[socket.socket] = []
    try:
        while len(peers) < size - 1:
            if stop.is_set():
                return peers
            if time.monotonic() > deadline:
                raise RendezvousError(
                    f"rank 0 waited at {host}:{port} for {size - 1} rank(s), {len(peers)} came "
                    "within --dist-timeout"
                )
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            peers.append(conn)
    finally:
        listener.close()
    return peers


def _join(host: str, port: int, rank: int, deadline: float, stop: threading.Event) -> socket.socket:
    """A rank > 0: connect to rank 0's rendezvous before the deadline."""
    while not stop.is_set():
        try:
            conn = socket.create_connection((host, port), timeout=RETRY_S * 5)
        except OSError:
            if time.monotonic() > deadline:
                raise RendezvousError(
                    f"rank {rank} could not reach rank 0's rendezvous {host}:{port} within "
                    "--dist-timeout"
                ) from None
            stop.wait(RETRY_S)
            continue
        conn.settimeout(None)
        conn.sendall(f"{rank}\n".encode())
        return conn
    raise RendezvousError(f"rank {rank} stopped before it joined {host}:{port}")


def form_group(args: StandinArgs, printer: LinePrinter, stop: threading.Event) -> Group | None:
    """Join (or, as rank 0, hold) the rendezvous; None for one node (RendezvousError on failure)."""
    where = placement(args)
    if where is None:
        return None
    size, rank, host, port = where
    deadline = time.monotonic() + _timeout(args)
    printer.log(
        f"{STANDIN_NAME}: node rank {rank} of {size}: rendezvous at {host}:{port}", ranks=False
    )
    group = Group(rank=rank, size=size)
    if rank == 0:
        group.peers = _hold(host, port, size, deadline, stop)
        names = [f"rank {i}" for i in range(1, size)]
    else:
        group.peers = [_join(host, port, rank, deadline, stop)]
        names = ["rank 0"]
    for peer, name in zip(group.peers, names, strict=False):
        _watch(group, peer, name, printer)
    printer.log(f"{STANDIN_NAME}: node rank {rank}: the group of {size} is formed", ranks=False)
    return group


class _DummyHealth(BaseHTTPRequestHandler):
    """SGLang's launch_dummy_health_check_server: 200 for its three paths, 404 otherwise."""

    paths: frozenset[str] = frozenset({"/ping", "/health", "/health_generate"})
    metrics: Callable[[], bytes] | None = None

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in self.paths:
            self._send(200, b"", "text/plain")
        elif path == "/metrics" and self.metrics is not None:
            self._send(200, self.metrics(), "text/plain; version=0.0.4")
        else:
            self._send(404, b'{"detail":"Not Found"}', "application/json")

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve_worker(
    args: StandinArgs,
    load_seconds: float,
    group: Group,
    printer: LinePrinter,
    stop: threading.Event,
) -> int:
    """A rank > 0 until SIGTERM or rank 0's stop (0) or a lost rank 0 (1): load, then only the
    dummy health server."""
    printer.log(f"Load weight begin. (stand-in: simulated, {load_seconds:.1f} s)")
    if stop.wait(load_seconds) or group.lost.is_set():
        group.close()
        return 1 if group.lost.is_set() else 0
    printer.log("Load weight end. type=StandinForCausalLM, dtype=none, avail mem=0.00 GB")
    handler = type(
        "DummyHealth",
        (_DummyHealth,),
        # No scheduler metrics reach a rank > 0's server: its registry is empty here.
        {"metrics": staticmethod(lambda: b"") if args.enable_metrics else None},
    )
    try:
        httpd = ThreadingHTTPServer((args.host, args.port), handler)
    except OSError as exc:
        printer.log(f"{STANDIN_NAME}: cannot bind {args.host}:{args.port}: {exc}", ranks=False)
        group.close()
        return 1
    threading.Thread(target=httpd.serve_forever, name="standin-dummy-health", daemon=True).start()
    printer.log(
        f"Dummy health check server started in background thread at {args.host}:{args.port}",
        ranks=False,
    )
    while not stop.wait(RETRY_S):
        if group.lost.is_set() or group.shutdown.is_set():
            break
    httpd.shutdown()
    httpd.server_close()
    group.close()
    if group.lost.is_set() and not stop.is_set():
        printer.log(f"{STANDIN_NAME}: node rank {group.rank}: exiting, {group.reason}", ranks=False)
        return 1
    printer.log(f"{STANDIN_NAME}: stopped", ranks=False)
    return 0
