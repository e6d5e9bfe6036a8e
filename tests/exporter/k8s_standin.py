"""A STAND-IN for the Kubernetes API server, for the exporter's Kubernetes-source tests.

This is not Kubernetes: no Kubernetes API server can run on the test machine. It is a small
threaded HTTP server on 127.0.0.1 that answers, per the Kubernetes API reference (core/v1), the
two read endpoints the exporter's source calls through the official Python client:

- ``GET /api/v1/namespaces/{ns}/pods?labelSelector=...``: a PodList (``metadata.name``,
  ``metadata.labels``, ``metadata.creationTimestamp``, ``status.phase``, ...).
- ``GET /api/v1/namespaces/{ns}/pods/{name}/log?follow=&timestamps=&container=&sinceSeconds=
  &tailLines=``: ``text/plain``, sent with chunked transfer encoding as the API server does for
  a followed log; with ``timestamps=true`` each line starts with the kubelet's RFC3339Nano time
  (Go's format: trailing zeros of the fraction trimmed) and a space.

Deliberate behaviour the tests rely on:

- ``sinceSeconds`` is honoured coarsely: the cut-off is rounded down to a whole second, so a
  reconnect gets some lines again that it has already seen (the exporter must drop them).
- A container keeps one log across restarts (like Docker's json-file log, unlike a real kubelet
  which serves only the current instance without ``previous``): the harder case for de-duplication.
- ``restart_container``/``end_streams``/``delete_pod`` end the open followed streams cleanly (the
  final zero-length chunk), as the API server does when a container stops or a stream times out.

Everything else (watch, auth, other resources) answers 404; namespaces listed in
``forbidden_namespaces`` answer 403 like an RBAC denial.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

STREAM_POLL_SECONDS = 0.05


def rfc3339nano(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: '2026-02-23T17:53:14.1234Z' (zeros trimmed, none if .0)."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    digits = f"{fraction:09d}".rstrip("0")
    return f"{base}.{digits}Z" if digits else f"{base}Z"


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass
class ContainerLog:
    entries: list[tuple[int, bytes]] = field(default_factory=list)  # (unix ns, line w/o \n)
    generation: int = 0  # bumped to end every open stream of this container
    # generation -> number of entries it had when it ended: a stream of an ended generation
    # (a container instance that was restarted) never gets the lines logged after its end.
    ends: dict[int, int] = field(default_factory=dict)

    def end_generation(self) -> None:
        self.ends[self.generation] = len(self.entries)
        self.generation += 1
    restarts: int = 0


@dataclass
class Pod:
    namespace: str
    name: str
    labels: dict[str, str]
    created: float
    phase: str
    containers: dict[str, ContainerLog]
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "labels": self.labels,
                "creationTimestamp": rfc3339(self.created),
                "resourceVersion": "1",
            },
            "spec": {
                "containers": [
                    {"name": name, "image": "lmsysorg/sglang:v0.5.21-cu129"}
                    for name in self.containers
                ],
            },
            "status": {
                "phase": self.phase,
                "containerStatuses": [
                    {
                        "name": name,
                        "image": "lmsysorg/sglang:v0.5.21-cu129",
                        "imageID": "",
                        "ready": self.phase == "Running",
                        "restartCount": log.restarts,
                    }
                    for name, log in self.containers.items()
                ],
            },
        }


@dataclass(frozen=True)
class LogRequest:
    """One pod-log request as the stand-in saw it, and the lines it sent (without stamps)."""

    pod: str
    params: dict[str, str]
    sent: list[bytes]


_SET_EXPR = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Kubernetes label-selector syntax: k=v, k==v, k!=v, k in (a,b), k notin (a), k, !k."""
    for term in re.split(r",(?![^(]*\))", selector):
        term = term.strip()
        if not term:
            continue
        set_expr = _SET_EXPR.match(term)
        if set_expr:
            key, op, values = set_expr.groups()
            allowed = {v.strip() for v in values.split(",")}
            if (op == "in") != (labels.get(key) in allowed):
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in re.split(r"==?", term, maxsplit=1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


class KubeApiStandIn:
    """Pods and their container logs, served over HTTP on 127.0.0.1 (see the module doc)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pods: dict[tuple[str, str], Pod] = {}
        self._closing = False
        self.forbidden_namespaces: set[str] = set()
        self.log_requests: list[LogRequest] = []
        self.list_requests: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> KubeApiStandIn:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig pointing at the stand-in: plain HTTP on loopback, no credentials."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "standin", "user": {}}],
            "contexts": [{"name": "standin", "context": {
                "cluster": "standin", "user": "standin", "namespace": namespace}}],
            "current-context": "standin",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # --- the cluster's state, driven by the tests ------------------------------------------

    def add_pod(
        self, name: str, *, namespace: str = "default", labels: dict[str, str] | None = None,
        containers: tuple[str, ...] = ("sglang",), phase: str = "Running",
        created: float | None = None,
    ) -> Pod:
        pod = Pod(namespace, name, dict(labels or {}), time.time() if created is None else created,
                  phase, {c: ContainerLog() for c in containers})
        with self._cond:
            self._pods[(namespace, name)] = pod
        return pod

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        with self._cond:
            pod = self._pods.pop((namespace, name))
            pod.deleted = True
            for log in pod.containers.values():
                log.end_generation()
            self._cond.notify_all()

    def log(self, pod: str, text: str | bytes, *, container: str = "sglang",
            namespace: str = "default", at_ns: int | None = None) -> None:
        """Append the lines of `text` to a container's log, stamped now (or at `at_ns`)."""
        data = text.encode() if isinstance(text, str) else text
        with self._cond:
            log = self._pods[(namespace, pod)].containers[container]
            for line in data.splitlines():
                stamp = time.time_ns() if at_ns is None else at_ns
                log.entries.append((stamp, line))
            self._cond.notify_all()

    def restart_container(self, pod: str, container: str = "sglang",
                          namespace: str = "default") -> None:
        with self._cond:
            log = self._pods[(namespace, pod)].containers[container]
            log.restarts += 1
            log.end_generation()
            self._cond.notify_all()

    def end_streams(self, pod: str, container: str = "sglang", namespace: str = "default") -> None:
        """End the followed streams without a restart (an API server's stream timeout)."""
        with self._cond:
            self._pods[(namespace, pod)].containers[container].end_generation()
            self._cond.notify_all()

    # --- what the handler calls ------------------------------------------------------------

    def list_pods(self, namespace: str, selector: str) -> list[Pod]:
        with self._cond:
            return [
                p for (ns, _), p in sorted(self._pods.items())
                if ns == namespace and selector_matches(selector, p.labels)
            ]

    def find_pod(self, namespace: str, name: str) -> Pod | None:
        with self._cond:
            return self._pods.get((namespace, name))

    def snapshot(self, log: ContainerLog) -> tuple[list[tuple[int, bytes]], int]:
        with self._cond:
            return list(log.entries), log.generation

    def wait_for_more(self, log: ContainerLog, seen: int, generation: int
                      ) -> tuple[list[tuple[int, bytes]], bool]:
        """New entries after `seen`, and whether the stream must end."""
        with self._cond:
            self._cond.wait_for(
                lambda: len(log.entries) > seen or log.generation != generation
                or self._closing,
                timeout=STREAM_POLL_SECONDS * 10,
            )
            end = log.ends.get(generation, len(log.entries))
            return log.entries[seen:end], log.generation != generation or self._closing


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _handler_for(api: KubeApiStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked streaming and keep-alive, like the API server

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            segments = [s for s in parts.path.split("/") if s]
            if segments[:3] != ["api", "v1", "namespaces"] or len(segments) < 5:
                self._json(404, _status(404, "NotFound", f"the stand-in has no {parts.path}"))
                return
            namespace = segments[3]
            if namespace in api.forbidden_namespaces:
                self._json(403, _status(
                    403, "Forbidden", f'pods is forbidden: User "system:serviceaccount:'
                    f'{namespace}:exporter" cannot list resource "pods" in API group "" in the '
                    f'namespace "{namespace}"'))
                return
            if segments[4:] == ["pods"]:
                api.list_requests.append(params)
                pods = api.list_pods(namespace, params.get("labelSelector", ""))
                self._json(200, {"apiVersion": "v1", "kind": "PodList",
                                 "metadata": {"resourceVersion": "1"},
                                 "items": [p.to_json() for p in pods]})
                return
            if len(segments) == 7 and segments[4] == "pods" and segments[6] == "log":
                self._log(namespace, segments[5], params)
                return
            self._json(404, _status(404, "NotFound", f"the stand-in has no {parts.path}"))

        def _json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _log(self, namespace: str, name: str, params: dict[str, str]) -> None:
            pod = api.find_pod(namespace, name)
            if pod is None:
                self._json(404, _status(404, "NotFound", f'pods "{name}" not found'))
                return
            container = params.get("container")
            if container is None:
                if len(pod.containers) != 1:
                    self._json(400, _status(400, "BadRequest",
                                            f"a container name must be specified for pod "
                                            f"{name}, choose one of: {list(pod.containers)}"))
                    return
                container = next(iter(pod.containers))
            log = pod.containers.get(container)
            if log is None:
                self._json(400, _status(400, "BadRequest",
                                        f"container {container} is not valid for pod {name}"))
                return
            entries, generation = api.snapshot(log)
            seen = len(entries)
            if "sinceSeconds" in params:
                # Coarse on purpose: a whole-second cut-off, earlier than asked.
                cutoff = math.floor(time.time() - int(params["sinceSeconds"])) * 1_000_000_000
                entries = [e for e in entries if e[0] >= cutoff]
            if "tailLines" in params:
                tail = int(params["tailLines"])
                entries = entries[-tail:] if tail > 0 else []
            record = LogRequest(name, params, [])
            api.log_requests.append(record)
            stamps = params.get("timestamps") == "true"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                self._send(entries, stamps, record)
                while params.get("follow") == "true":
                    more, done = api.wait_for_more(log, seen, generation)
                    seen += len(more)
                    self._send(more, stamps, record)
                    if done:
                        break
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client went away: nothing to tidy

        def _send(self, entries: list[tuple[int, bytes]], stamps: bool,
                  record: LogRequest) -> None:
            if not entries:
                return
            body = b"".join(
                (rfc3339nano(ns).encode() + b" " if stamps else b"") + line + b"\n"
                for ns, line in entries
            )
            record.sent.extend(line for _, line in entries)
            self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
            self.wfile.flush()

    return Handler
