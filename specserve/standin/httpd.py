"""The stand-in's HTTP surface (stdlib ThreadingHTTPServer), mirroring SGLang's routes.

Auth follows upstream's `add_api_key_middleware`: with `--api-key`, every path except `/health*`
and `/metrics` needs `Authorization: Bearer <key>`, else 401 `{"error": "Unauthorized"}`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from specserve.standin import api
from specserve.standin.engine import Engine, EngineClosed, Request
from specserve.standin.logfmt import LinePrinter
from specserve.standin.metrics import NativeMetrics

# A request never waits longer than this for its tokens (wall seconds).
REQUEST_TIMEOUT_S = 600.0
HEALTH_GENERATE_TIMEOUT_S = 20.0


@dataclass
class ServerState:
    engine: Engine
    printer: LinePrinter
    metrics: NativeMetrics | None
    api_key: str | None
    model_name: str
    server_info: dict[str, Any]
    model_info: dict[str, Any]
    models: dict[str, Any]
    content_factor_of: Any
    phase: str = "warming"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_phase(self, phase: str) -> None:
        with self.lock:
            self.phase = phase

    def get_phase(self) -> str:
        with self.lock:
            return self.phase


def _wait(req: Request, timeout: float) -> str:
    """Collect `req`'s text until it is done; returns the text."""
    deadline = time.monotonic() + timeout
    pieces: list[str] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            req.cancelled.set()
            raise TimeoutError("generation timed out")
        kind, payload = req.out.get(timeout=remaining)
        if kind == "tokens":
            pieces.extend(payload)  # type: ignore[arg-type]
        else:
            return "".join(pieces)


def make_handler(state: ServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "specserve-standin"

        def log_message(self, format: str, *args: Any) -> None:
            # Access lines are printed by _access in uvicorn's shape, as SGLang's are.
            return

        def _access(self, status: int) -> None:
            host, port = self.client_address[:2]
            phrase = HTTPStatus(status).phrase
            state.printer.raw(
                f'INFO:     {host}:{port} - "{self.command} {self.path} '
                f'{self.request_version}" {status} {phrase}'
            )

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self._access(status)

        def _json(self, status: int, doc: Any) -> None:
            self._send(status, json.dumps(doc).encode("utf-8"), "application/json")

        def _empty(self, status: int) -> None:
            self._send(status, b"", "text/plain; charset=utf-8")

        def _authorized(self, path: str) -> bool:
            if state.api_key is None or path.startswith(("/health", "/metrics")):
                return True
            if self.headers.get("Authorization") == f"Bearer {state.api_key}":
                return True
            self._json(401, {"error": "Unauthorized"})
            return False

        def _body(self) -> dict[str, Any] | None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                doc = json.loads(raw or b"{}")
            except ValueError as exc:
                self._json(400, api.error_body(f"request body is not valid JSON: {exc}", 400))
                return None
            if not isinstance(doc, dict):
                self._json(400, api.error_body("request body must be a JSON object", 400))
                return None
            return doc

        # -- routes ---------------------------------------------------------------------------

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if not self._authorized(path):
                return
            if path == "/health":
                self._empty(200 if state.get_phase() == "ready" else 503)
            elif path == "/health_generate":
                self._health_generate()
            elif path in ("/get_server_info", "/server_info"):
                info = dict(state.server_info)
                running, queued = state.engine.counts()
                info["standin_state"] = {
                    "phase": state.get_phase(),
                    "running_requests": running,
                    "queued_requests": queued,
                }
                self._json(200, info)
            elif path in ("/get_model_info", "/model_info"):
                self._json(200, state.model_info)
            elif path == "/v1/models":
                self._json(200, state.models)
            elif path == "/metrics":
                if state.metrics is None:
                    self._json(404, {"detail": "Not Found"})
                else:
                    self._send(200, generate_latest(state.metrics.registry), CONTENT_TYPE_LATEST)
            else:
                self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            if not self._authorized(path):
                return
            if path == "/v1/chat/completions":
                self._chat()
            elif path == "/generate":
                self._generate()
            elif path == "/health_generate":
                self._health_generate()
            else:
                self._json(404, {"detail": "Not Found"})

        def _ready_or_503(self) -> bool:
            if state.get_phase() == "ready":
                return True
            self._json(503, api.error_body("server is not ready", 503, "ServiceUnavailable"))
            return False

        def _submit(self, req: Request) -> bool:
            try:
                state.engine.submit(req)
            except EngineClosed as exc:
                self._json(503, api.error_body(str(exc), 503, "ServiceUnavailable"))
                return False
            return True

        def _health_generate(self) -> None:
            if state.get_phase() != "ready":
                self._empty(503)
                return
            req = Request(
                text="health",
                prompt_tokens=1,
                max_new_tokens=1,
                natural_tokens=None,
                content_factor=1.0,
            )
            try:
                state.engine.submit(req)
                _wait(req, HEALTH_GENERATE_TIMEOUT_S)
            except (EngineClosed, TimeoutError, queue.Empty):
                self._empty(503)
                return
            self._empty(200 if req.finish_reason in ("length", "stop") else 503)

        def _chat(self) -> None:
            body = self._body()
            if body is None or not self._ready_or_503():
                return
            try:
                req, stream, include_usage = api.chat_request(body, state.content_factor_of)
            except api.BadRequest as exc:
                self._json(400, api.error_body(str(exc), 400))
                return
            model = str(body.get("model") or state.model_name)
            if not self._submit(req):
                return
            cid = api.chat_id()
            if not stream:
                self._finish_plain(req, lambda text: api.chat_response(req, model, text, cid))
                return
            self._stream(
                req,
                first=[api.chat_chunk(cid, model, {"role": "assistant", "content": ""}, None)],
                piece=lambda text: api.chat_chunk(cid, model, {"content": text}, None),
                last=lambda: (
                    [api.chat_chunk(cid, model, {}, req.finish_reason)]
                    + ([api.usage_chunk(cid, model, req)] if include_usage else [])
                ),
            )

        def _generate(self) -> None:
            body = self._body()
            if body is None or not self._ready_or_503():
                return
            try:
                req, stream = api.generate_request(body, state.content_factor_of)
            except api.BadRequest as exc:
                self._json(400, api.error_body(str(exc), 400))
                return
            if not self._submit(req):
                return
            started = time.monotonic()
            if not stream:
                self._finish_plain(
                    req, lambda text: api.generate_response(req, text, time.monotonic() - started)
                )
                return
            text_so_far: list[str] = []

            def piece(text: str) -> dict[str, Any]:
                text_so_far.append(text)
                # Upstream's /generate stream carries the cumulative text in each event.
                return api.generate_response(req, "".join(text_so_far), 0.0)

            self._stream(req, first=[], piece=piece, last=lambda: [])

        def _finish_plain(self, req: Request, shape: Any) -> None:
            try:
                text = _wait(req, REQUEST_TIMEOUT_S)
            except (TimeoutError, queue.Empty):
                self._json(504, api.error_body("generation timed out", 504, "Timeout"))
                return
            if req.finish_reason == "abort":
                self._json(
                    503,
                    api.error_body(
                        "request aborted: server shutting down", 503, "ServiceUnavailable"
                    ),
                )
                return
            self._json(200, shape(text))

        def _stream(self, req: Request, first: list[dict[str, Any]], piece: Any, last: Any) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self._access(200)
            deadline = time.monotonic() + REQUEST_TIMEOUT_S
            try:
                for doc in first:
                    self._event(doc)
                while True:
                    kind, payload = req.out.get(timeout=max(0.01, deadline - time.monotonic()))
                    if kind == "tokens":
                        self._event(piece("".join(payload)))  # type: ignore[arg-type]
                        continue
                    if req.finish_reason == "abort":
                        self._event(api.error_body("request aborted", 503, "ServiceUnavailable"))
                    else:
                        for doc in last():
                            self._event(doc)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    return
            except (BrokenPipeError, ConnectionResetError, queue.Empty):
                # The client left (or the deadline passed): free its slot in the batch.
                req.cancelled.set()

        def _event(self, doc: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(doc).encode("utf-8") + b"\n\n")
            self.wfile.flush()

    return Handler


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(host: str, port: int, state: ServerState) -> StandinHTTPServer:
    return StandinHTTPServer((host, port), make_handler(state))
