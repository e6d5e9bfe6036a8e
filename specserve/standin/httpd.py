"""The stand-in's HTTP surface (stdlib ThreadingHTTPServer), mirroring SGLang's routes.

Read from SGLang's `entrypoints/http_server.py` and `utils/auth.py`:
- `/health` and `/health_generate` are one handler (GET): 503 while starting or shutting down;
  with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION (default true) `/health` runs it too, else it
  answers 200 at once. The handler queues a one-token generation (skipped when the scheduler is
  busy: running requests already prove liveness), then checks once a second whether the
  scheduler produced anything since it started: 200 at the first check that sees output, so
  never before 1 s; after SGLANG_HEALTH_CHECK_TIMEOUT (20 s) it logs upstream's error, marks
  the server unhealthy and answers 503. The stand-in's waits follow SPECSERVE_STANDIN_TIME_SCALE.
- `/ready`: 200 only when the server is up (warm-up done, not shutting down, not marked
  unhealthy by a failed health check), else 503; it generates nothing.
- `/generate` and the OpenAI routes serve during warm-up (upstream's warm-up is a /generate).
- `/server_info`, `/model_info`; `/get_server_info` and `/get_model_info` are deprecated aliases
  that log upstream's warning on every call.
- `/v1/loads` (entrypoints/v1_loads.py, managers/load_snapshot.py): one load per DP rank with
  the live `num_running_reqs` and `num_waiting_reqs` (not the logged window's gauges); the
  stand-in counts the generation requests it is answering as running and queues none. A rolling
  deploy reads it to wait for a node's in-flight requests (ansible/roles/router).
- With `--api-key`, paths starting with `/health`, `/ready` or `/metrics` (and OPTIONS) are
  exempt (the prefixes come from the contract data); everything else needs
  `Authorization: Bearer <key>`, else 401 `{"error": "Unauthorized"}`.
"""

from __future__ import annotations

import hmac
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from specserve.standin import api
from specserve.standin.engine import Engine, EngineClosed, Request
from specserve.standin.knobs import sglang_env_bool
from specserve.standin.logfmt import LinePrinter
from specserve.standin.metrics import NativeMetrics
from specserve.upstream import SGLangContract

# A request never waits longer than this for its tokens (wall seconds).
REQUEST_TIMEOUT_S = 600.0
DEPRECATED_ENDPOINT = (
    "Endpoint '{old}' is deprecated and will be removed in a future version. "
    "Please use '{new}' instead."
)
DEPRECATED_ALIASES = {"/get_server_info": "/server_info", "/get_model_info": "/model_info"}


@dataclass
class ServerState:
    engine: Engine
    printer: LinePrinter
    metrics: NativeMetrics | None
    api_key: str | None
    contract: SGLangContract
    model_name: str
    server_info: Callable[[], dict[str, Any]]
    model_info: dict[str, Any]
    models: dict[str, Any]
    content_factor_of: Any
    time_scale: float = 1.0
    custom_labels: tuple[str, ...] = ()
    custom_labels_header: str = ""
    phase: str = "starting"
    """starting -> up; up <-> unhealthy (health checks); any -> stopping."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    inflight: int = 0
    """Generation requests being answered (what /v1/loads reports as running)."""
    health_generation: bool = field(init=False)
    health_timeout_s: float = field(init=False)

    def __post_init__(self) -> None:
        facts = self.contract.facts["health"]
        default = bool(facts["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"]["default"])
        name = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
        try:
            self.health_generation = sglang_env_bool(os.environ, name, default)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        self.health_timeout_s = float(
            int(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", facts["health_check_timeout_s"]))
        )

    def set_phase(self, phase: str) -> None:
        with self.lock:
            if self.phase != "stopping":
                self.phase = phase

    def get_phase(self) -> str:
        with self.lock:
            return self.phase

    def count_inflight(self, delta: int) -> None:
        with self.lock:
            self.inflight += delta

    def loads(self) -> dict[str, Any]:
        """/v1/loads' body, the core section of one DP rank (LoadSnapshot's field names)."""
        with self.lock:
            running = self.inflight
        return {
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            "version": str(self.server_info().get("version", "")),
            "accelerator": None,
            "num_accelerators": 0,
            "loads": [{"timestamp": time.time(), "dp_rank": 0, "num_running_reqs": running,
                       "num_waiting_reqs": 0}],
        }


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
            if state.api_key is None or state.contract.auth_exempt(path, self.command):
                return True
            if _bearer_ok(self.headers.get("Authorization"), state.api_key):
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
            if path in DEPRECATED_ALIASES:
                new = DEPRECATED_ALIASES[path]
                state.printer.log(DEPRECATED_ENDPOINT.format(old=path, new=new), ranks=False)
                path = new
            if path == "/ready":
                self._empty(200 if state.get_phase() == "up" else 503)
            elif path in ("/health", "/health_generate"):
                self._health_generate(path)
            elif path == "/server_info":
                self._json(200, state.server_info())
            elif path == "/model_info":
                self._json(200, state.model_info)
            elif path == "/v1/models":
                self._json(200, state.models)
            elif path == "/v1/loads":
                self._json(200, state.loads())
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
            if path in ("/v1/chat/completions", "/generate"):
                state.count_inflight(1)
                try:
                    self._chat() if path == "/v1/chat/completions" else self._generate()
                finally:
                    state.count_inflight(-1)
            elif path in ("/health", "/health_generate", "/ready", "/server_info", "/model_info"):
                self._json(405, {"detail": "Method Not Allowed"})
            else:
                self._json(404, {"detail": "Not Found"})

        def _submit(self, req: Request) -> bool:
            try:
                state.engine.submit(req)
            except EngineClosed as exc:
                self._json(503, api.error_body(str(exc), 503, "ServiceUnavailable"))
                return False
            return True

        def _health_generate(self, path: str) -> None:
            phase = state.get_phase()
            if phase == "stopping":
                state.printer.log(
                    "Health check request received during shutdown. Returning 503.", ranks=False
                )
                self._empty(503)
                return
            if phase == "starting":
                self._empty(503)
                return
            if path == "/health" and not state.health_generation:
                self._empty(200)
                return
            tic = time.monotonic()
            tic_wall = time.time()
            engine = state.engine
            if engine.idle():
                # The scheduler skips a health request when busy; idle, it runs one token.
                probe = Request(
                    text="health",
                    prompt_tokens=1,
                    max_new_tokens=1,
                    natural_tokens=None,
                    content_factor=1.0,
                    log_metrics=False,
                )
                try:
                    engine.submit(probe)
                except EngineClosed:
                    self._empty(503)
                    return
            timeout = state.health_timeout_s
            while time.monotonic() < tic + timeout * state.time_scale:
                time.sleep(1.0 * state.time_scale)
                if engine.last_output > tic:
                    state.set_phase("up")
                    self._empty(200)
                    return
            last = time.strftime("%H:%M:%S", time.localtime(tic_wall - (tic - engine.last_output)))
            state.printer.log(
                "Health check failed. Server couldn't get a response from detokenizer for last "
                f"{int(timeout)} seconds. tic start time: "
                f"{time.strftime('%H:%M:%S', time.localtime(tic_wall))}. "
                f"last_heartbeat time: {last}",
                ranks=False,
            )
            state.set_phase("unhealthy")
            self._empty(503)

        def _chat(self) -> None:
            body = self._body()
            if body is None:
                return
            try:
                req, stream, include_usage = api.chat_request(body, state.content_factor_of)
            except api.BadRequest as exc:
                self._json(400, api.error_body(str(exc), 400))
                return
            # Only the OpenAI routes read the header (serving_chat / serving_completions).
            req.custom_labels = api.extract_custom_labels(
                self.headers.get, state.custom_labels, state.custom_labels_header
            )
            model = str(body.get("model") or state.model_name)
            if not self._submit(req):
                return
            cid = api.chat_id()
            details = api.wants_spec_details(body)

            def ext() -> dict[str, Any] | None:
                return api.sglext(req) if details else None

            if not stream:

                def plain(text: str) -> dict[str, Any]:
                    doc = api.chat_response(req, model, text, cid)
                    if (extension := ext()) is not None:
                        doc["sglext"] = extension
                    return doc

                self._finish_plain(req, plain)
                return
            self._stream(
                req,
                first=[api.chat_chunk(cid, model, {"role": "assistant", "content": ""}, None)],
                piece=lambda text: api.chat_chunk(cid, model, {"content": text}, None),
                last=lambda: (
                    [api.chat_chunk(cid, model, {}, req.finish_reason)]
                    + ([api.sglext_chunk(cid, model, e)] if (e := ext()) is not None else [])
                    + ([api.usage_chunk(cid, model, req)] if include_usage else [])
                ),
            )

        def _generate(self) -> None:
            body = self._body()
            if body is None:
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


def _bearer_ok(header: str | None, key: str) -> bool:
    """utils/auth.py's _check_bearer_token: "Bearer <key>", scheme case-insensitive."""
    if not header:
        return False
    parts = header.split(" ", 1)
    return len(parts) == 2 and parts[0].lower() == "bearer" and hmac.compare_digest(parts[1], key)


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(host: str, port: int, state: ServerState) -> StandinHTTPServer:
    return StandinHTTPServer((host, port), make_handler(state))
