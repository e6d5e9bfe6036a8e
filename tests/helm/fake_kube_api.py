"""A fake Kubernetes API server on loopback: serves a fixed pod list and a pod watch, and records
every request, so the real router's service discovery can run here and be seen to ask only for
what the chart's Role grants.

It answers only the core/v1 pods collection of the namespace the test names (list, watch),
filtered by an equality-based `labelSelector` as the API server filters it, and refuses
everything else with 403, as an API server does for a verb the token's Role lacks.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: dict[str, list[str]]

    @property
    def verb(self) -> str:
        # The RBAC verb the API server would check for this request.
        if self.method != "GET":
            return self.method.lower()
        if self.query.get("watch", ["false"])[0] in ("true", "1"):
            return "watch"
        return "list" if self.path.endswith("/pods") else "get"

    @property
    def label_selector(self) -> dict[str, str] | None:
        """The request's labelSelector (key=value terms only), None without one."""
        raw = self.query.get("labelSelector", [""])[0]
        if not raw:
            return None
        terms = [t.split("=", 1) for t in raw.split(",")]
        assert all(len(t) == 2 and "!" not in t[0] for t in terms), f"not key=value: {raw}"
        return {k: v.removeprefix("=") for k, v in terms}


def pod(name: str, namespace: str, labels: dict[str, str], ready: bool = True,
        ip: str = "127.0.0.1") -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "labels": labels, "uid": f"uid-{name}",
            "resourceVersion": "10",
        },
        "spec": {"containers": [{"name": "sglang", "image": "specserve/sglang"}]},
        "status": {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }  # fmt: skip


@dataclass
class FakeKubeApi:
    namespace: str
    pods: list[dict[str, Any]]
    calls: list[Call] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeKubeApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                call = Call("GET", parts.path, parse_qs(parts.query))
                api.calls.append(call)
                if parts.path != f"/api/v1/namespaces/{api.namespace}/pods":
                    self._json(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "Forbidden", "code": 403,
                                     "message": f"{parts.path} is outside the Role"})  # fmt: skip
                    return
                if call.verb == "list":
                    wanted = call.label_selector or {}
                    items = [p for p in api.pods
                             if wanted.items() <= p["metadata"]["labels"].items()]  # fmt: skip
                    self._json(200, {"kind": "PodList", "apiVersion": "v1",
                                     "metadata": {"resourceVersion": "10"},
                                     "items": items})  # fmt: skip
                    return
                # A watch: nothing changes; keep the stream open (bookmarks) until asked to stop.
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while not api._stop.wait(1.0):
                    line = json.dumps({"type": "BOOKMARK", "object": {
                        "kind": "Pod", "apiVersion": "v1",
                        "metadata": {"resourceVersion": "10"}}}).encode() + b"\n"  # fmt: skip
                    try:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                    except OSError:
                        return
                with contextlib.suppress(OSError):
                    self.wfile.write(b"0\r\n\r\n")

            def do_POST(self) -> None:
                api.calls.append(Call("POST", urlsplit(self.path).path, {}))
                self._json(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "router", "user": {"token": "fake-service-account-token"}}],
            "contexts": [{"name": "fake", "context": {
                "cluster": "fake", "user": "router", "namespace": self.namespace}}],
        }))  # fmt: skip
        return path

    def wait_for(self, verb: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(c.verb == verb for c in self.calls):
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
