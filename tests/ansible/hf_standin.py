"""A stand-in for the Hugging Face Hub on 127.0.0.1: exactly the endpoints that the pinned
huggingface_hub (1.1.7) calls for `hf download REPO --local-dir DIR`, read from its source:

- `GET /api/models/{repo}/revision/{rev}` (HfApi.model_info via snapshot_download): `id`, `sha`,
  `siblings[].rfilename`.
- `HEAD /{repo}/resolve/{rev}/{file}` (get_hf_file_metadata): `X-Repo-Commit`, `ETag` (the file's
  SHA-256, quoted, as the Hub sends for LFS files), `Content-Length`. No `X-Xet-*` headers, so the
  client takes the plain HTTP download path, not Xet.
- `GET /{repo}/resolve/{rev}/{file}` (http_get): the bytes.

Every request needs `Authorization: Bearer <token>`; otherwise 401, as the Hub answers a private
repository.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

COMMIT = hashlib.sha1(b"specserve hf stand-in").hexdigest()


@dataclass
class HubStandIn:
    repo: str
    root: Path
    token: str
    url: str = ""
    requests: list[tuple[str, str, int]] = field(default_factory=list)

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())


def _handler(hub: HubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # the test reads `hub.requests` instead

        def _send(self, status: int, headers: dict[str, str], body: bytes, head: bool) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            hub.requests.append((self.command, urlsplit(self.path).path, status))

        def _error(self, status: int, message: str, head: bool, code: str = "") -> None:
            headers = {"Content-Type": "application/json", "X-Error-Message": message}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, headers, json.dumps({"error": message}).encode(), head)

        def _route(self, head: bool) -> None:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer "):
                self._error(401, "Repository not found", head, code="RepoNotFound")
                return
            if auth.removeprefix("Bearer ") != hub.token:
                self._error(401, "Invalid credentials in Authorization header", head)
                return
            path = unquote(urlsplit(self.path).path)
            api = f"/api/models/{hub.repo}/revision/"
            resolve = f"/{hub.repo}/resolve/"
            if path.startswith(api) and path[len(api):] in ("main", COMMIT) and not head:
                body = {"id": hub.repo, "sha": COMMIT,
                        "siblings": [{"rfilename": name} for name in hub.files()]}
                self._send(200, {"Content-Type": "application/json"},
                           json.dumps(body).encode(), head)
                return
            if path.startswith(resolve):
                rev, _, name = path[len(resolve):].partition("/")
                target = hub.root / name
                if rev in ("main", COMMIT) and name in hub.files():
                    data = target.read_bytes()
                    headers = {"X-Repo-Commit": COMMIT,
                               "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                               "Content-Type": "application/octet-stream"}
                    self._send(200, headers, data, head)
                    return
            self._error(404, f"Entry not found: {path}", head, code="EntryNotFound")

        def do_GET(self) -> None:
            self._route(head=False)

        def do_HEAD(self) -> None:
            self._route(head=True)

    return Handler


@contextmanager
def serve(repo: str, root: Path, token: str) -> Iterator[HubStandIn]:
    """Serve `root` as model repo `repo` on a free loopback port until the block ends."""
    hub = HubStandIn(repo=repo, root=root, token=token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
