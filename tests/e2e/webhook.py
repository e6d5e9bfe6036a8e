"""A webhook receiver for Alertmanager: records every notification it is sent, in order."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Delivered:
    """One alert inside one webhook notification."""

    path: str
    received_at: float
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


class WebhookReceiver:
    """Alertmanager's webhook_config target on 127.0.0.1 (payload version 4)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._delivered: list[Delivered] = []
        self.payloads: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                payload = json.loads(self.rfile.read(length))
                receiver._record(self.path, payload)
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep the test output to failures

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _record(self, path: str, payload: dict[str, Any]) -> None:
        now = time.time()
        with self._lock:
            self.payloads.append(payload)
            for alert in payload.get("alerts", []):
                self._delivered.append(
                    Delivered(path, now, alert["status"], dict(alert["labels"]),
                              dict(alert.get("annotations", {})))
                )  # fmt: skip

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def delivered(self) -> list[Delivered]:
        with self._lock:
            return list(self._delivered)

    def find(self, name: str, status: str) -> list[Delivered]:
        return [d for d in self.delivered() if d.name == name and d.status == status]
