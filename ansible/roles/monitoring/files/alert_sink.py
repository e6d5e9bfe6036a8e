"""A webhook receiver that writes down what Alertmanager delivers: the demo's alert sink.

Alertmanager's webhook_configs POST one JSON notification per alert group (payload version 4:
receiver, status, alerts with their labels and annotations). Each one becomes a JSON line on
stdout (`docker logs <container>-alert-sink`), with a one-line summary per alert in front of the
notification as received, and whether the request carried an Authorization header (never its
value: that is how a webhook's credentials_file is seen to work). `GET /-/healthy` and
`GET /-/ready` answer 200 for the health check and the role's readiness wait.

Standard library only: the monitoring role runs it with the exporter image's Python.
The demo's Alertmanager configuration (monitoring/alertmanager/alertmanager.yml) routes to it on
127.0.0.1:9095; production routes to real receivers instead (docs/alerting.md).

    python3 alert_sink.py --host 127.0.0.1 --port 9095
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Alertmanager's notifications are a few KiB; a body above this is refused, never buffered.
MAX_BODY_BYTES = 1 << 20


def alert_summary(alert: dict[str, Any]) -> str:
    """`firing SpecServeExporterDown severity=warning instance=127.0.0.1:9433: <summary>`."""
    labels = alert.get("labels") or {}
    annotations = alert.get("annotations") or {}
    text = f"{alert.get('status', '?')} {labels.get('alertname', '?')}"
    for name in ("severity", "instance"):
        if name in labels:
            text += f" {name}={labels[name]}"
    if annotations.get("summary"):
        text += f": {annotations['summary']}"
    return text


def notification_line(
    path: str, notification: dict[str, Any], now: datetime, authorization: bool
) -> str:
    alerts = notification.get("alerts")
    record = {
        "received_at": now.isoformat(timespec="seconds"),
        "path": path,
        "authorization_header": authorization,
        "receiver": notification.get("receiver"),
        "status": notification.get("status"),
        "alerts": [alert_summary(a) for a in alerts if isinstance(a, dict)]
        if isinstance(alerts, list)
        else [],
        "notification": notification,
    }
    return json.dumps(record, sort_keys=False)


class Handler(BaseHTTPRequestHandler):
    server_version = "specserve-alert-sink"

    def _answer(self, status: int, text: str) -> None:
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path in ("/-/healthy", "/-/ready"):
            self._answer(200, "ok")
        else:
            self._answer(404, "POST Alertmanager webhook notifications here; GET /-/healthy")

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._answer(411, "Content-Length required")
            return
        if length < 0 or length > MAX_BODY_BYTES:
            self._answer(413, f"body of {length} bytes: the limit is {MAX_BODY_BYTES}")
            return
        try:
            notification = json.loads(self.rfile.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self._answer(400, f"not JSON: {exc}")
            return
        if not isinstance(notification, dict):
            self._answer(400, "not an Alertmanager notification: a JSON object is expected")
            return
        line = notification_line(
            self.path, notification, datetime.now(UTC), "Authorization" in self.headers
        )
        print(line, flush=True)
        self._answer(200, "logged")

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: stdout holds the notifications and nothing else."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9095)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    # PID 1 in its container: without a handler SIGTERM is ignored and `docker stop` waits 10 s.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    print(f"alert sink listening on {args.host}:{args.port}", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
