"""The exporter's HTTP side: /metrics (Prometheus text, or OpenMetrics when asked), /healthz."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from .sources.base import Source, SourceState

StartResponse = Callable[..., Any]
Environ = dict[str, Any]

INDEX = b"""<html><head><title>specserve exporter</title></head><body>
<h1>specserve exporter</h1><p>SGLang speculative-decoding log metrics.</p>
<ul><li><a href="/metrics">/metrics</a></li><li><a href="/healthz">/healthz</a></li></ul>
</body></html>"""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _ThreadingServerV6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape would drown the exporter's own messages


def make_app(registry: CollectorRegistry, source: Source) -> Callable[..., Iterable[bytes]]:
    metrics_app = make_wsgi_app(registry)

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            result: Iterable[bytes] = metrics_app(environ, start_response)
            return result
        if path == "/healthz":
            report = source.status()
            healthy = report.state is not SourceState.ERROR
            body = json.dumps({
                "status": "ok" if healthy else "error",
                "source": {
                    "kind": report.kind,
                    "state": report.state.value,
                    "detail": report.detail,
                    "since": report.since,
                    "reopens": report.reopens,
                },
            }).encode()
            # Waiting for a file or container that is not there yet is normal during a deploy;
            # only an error the operator must fix makes the exporter unhealthy.
            status = "200 OK" if healthy else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json")])
            return [body]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html")])
            return [INDEX]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


class HttpServer:
    def __init__(self, host: str, port: int, app: Callable[..., Iterable[bytes]]) -> None:
        server_class = _ThreadingServerV6 if ":" in host else _ThreadingServer
        self._server = make_server(
            host, port, app, server_class=server_class, handler_class=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
