"""`helm test`: a real chat completion, then the exporters must have seen decode lines with a mean
accept length above the floor. Runs in the exporter image (Python + prometheus_client).

Configuration (environment):
  SPECSERVE_TEST_API_URL       base URL of the API (the router when enabled, else the Service)
  SPECSERVE_TEST_PODS_HOST     DNS name resolving to every server pod (the headless Service);
                               empty: do not read the exporters
  SPECSERVE_TEST_METRICS_PORT  exporter port on each pod
  SPECSERVE_TEST_API_KEY_FILE  file holding the API key (optional)
  SPECSERVE_TEST_SPECULATIVE   "true" when the profile enables speculative decoding
  SPECSERVE_TEST_FLOOR         accept-length floor
  SPECSERVE_TEST_MAX_TOKENS, SPECSERVE_TEST_MAX_REQUESTS, SPECSERVE_TEST_TIMEOUT_SECONDS
Exit status 0 when every check passes, 1 with the reason on stderr otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# The exporter image installs the specserve package: the same by-value redaction as the
# launcher's log tee. /server_info carries the API key (api_key and inside launch_command).
from specserve.secrets import Redactor, secrets_in_server_info

PROMPT = "Count from 1 to 300, one number per line, and nothing else."
# SGLang's name first; its deprecated alias (a warning in SGLang's log on every call) only when
# the server is too old to know the new name and answers 404.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")


class CheckFailed(Exception):
    """A check did not pass; the message says which and what was seen."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status when the server answered one


@dataclass(frozen=True)
class Config:
    api_url: str
    pods_host: str
    metrics_port: int
    api_key: str | None
    speculative: bool
    floor: float
    max_tokens: int
    max_requests: int
    deadline: float


@dataclass(frozen=True)
class Sample:
    decode_lines: float
    accept_sum: float
    accept_count: float


def load_config(env: dict[str, str]) -> Config:
    key_file = env.get("SPECSERVE_TEST_API_KEY_FILE", "")
    api_key = None
    if key_file:
        with open(key_file, encoding="utf-8") as handle:
            api_key = handle.read().strip()
    timeout = float(env.get("SPECSERVE_TEST_TIMEOUT_SECONDS", "900"))
    return Config(
        api_url=env["SPECSERVE_TEST_API_URL"].rstrip("/"),
        pods_host=env.get("SPECSERVE_TEST_PODS_HOST", ""),
        metrics_port=int(env.get("SPECSERVE_TEST_METRICS_PORT", "9433")),
        api_key=api_key,
        speculative=env.get("SPECSERVE_TEST_SPECULATIVE", "true") == "true",
        floor=float(env.get("SPECSERVE_TEST_FLOOR", "1.5")),
        max_tokens=int(env.get("SPECSERVE_TEST_MAX_TOKENS", "256")),
        max_requests=int(env.get("SPECSERVE_TEST_MAX_REQUESTS", "8")),
        deadline=time.monotonic() + timeout,
    )


def _remaining(cfg: Config) -> float:
    left = cfg.deadline - time.monotonic()
    if left <= 0:
        raise CheckFailed("out of time (SPECSERVE_TEST_TIMEOUT_SECONDS)")
    return left


def http(cfg: Config, url: str, body: dict[str, Any] | None = None) -> bytes:
    headers = {"Content-Type": "application/json"}
    if cfg.api_key:
        headers["Authorization"] = f"Bearer {cfg.api_key}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=min(_remaining(cfg), 600)) as response:
            payload: bytes = response.read()
            return payload
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise CheckFailed(f"{url}: HTTP {exc.code} {detail}", exc.code) from exc
    except OSError as exc:
        raise CheckFailed(f"{url}: {exc}") from exc


def pod_addresses(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CheckFailed(f"cannot resolve {host} (no ready server pod?): {exc}") from exc
    return sorted({str(info[4][0]) for info in infos})


def scrape(cfg: Config, address: str) -> Sample:
    host = f"[{address}]" if ":" in address else address
    text = http(cfg, f"http://{host}:{cfg.metrics_port}/metrics").decode("utf-8")
    lines = accept_sum = accept_count = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "specserve_log_lines_parsed_total"
                and sample.labels.get("kind") == "decode"
            ):
                lines += sample.value
            elif sample.name == "specserve_decode_accept_length_sum":
                accept_sum += sample.value
            elif sample.name == "specserve_decode_accept_length_count":
                accept_count += sample.value
    return Sample(lines, accept_sum, accept_count)


def scrape_all(cfg: Config) -> dict[str, Sample]:
    return {addr: scrape(cfg, addr) for addr in pod_addresses(cfg.pods_host, cfg.metrics_port)}


def server_info(cfg: Config) -> bytes:
    """/server_info, or /get_server_info from a server that answers 404 to the new name."""
    new, old = SERVER_INFO_PATHS
    try:
        return http(cfg, f"{cfg.api_url}{new}")
    except CheckFailed as exc:
        if exc.status != 404:
            raise
    return http(cfg, f"{cfg.api_url}{old}")


def server_summary(cfg: Config) -> str:
    """What the server runs, from /server_info, with every secret removed by value."""
    try:
        info = json.loads(server_info(cfg))
    except (CheckFailed, ValueError) as exc:
        return f"/server_info not readable here ({str(exc)[:120]})"
    if not isinstance(info, dict):
        return "/server_info did not answer a JSON object"
    clean = Redactor([cfg.api_key, *secrets_in_server_info(info)]).redact_value(info)
    return (
        f"SGLang {clean.get('version', '?')}, speculative algorithm "
        f"{clean.get('speculative_algorithm') or 'none'}, launch command: "
        f"{clean.get('launch_command') or '?'}"
    )


def model_id(cfg: Config) -> str:
    models = json.loads(http(cfg, f"{cfg.api_url}/v1/models"))
    data = models.get("data") or []
    if not data:
        raise CheckFailed(f"{cfg.api_url}/v1/models lists no model: {models}")
    return str(data[0]["id"])


def chat(cfg: Config, model: str) -> int:
    """One chat completion; returns the completion tokens after checking the answer's shape."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": cfg.max_tokens,
        "temperature": 0,
        # SGLang's extension: keep decoding to max_tokens so enough decode batches are logged.
        "ignore_eos": True,
    }
    answer = json.loads(http(cfg, f"{cfg.api_url}/v1/chat/completions", body))
    choices = answer.get("choices") or []
    if not choices:
        raise CheckFailed(f"chat completion has no choices: {str(answer)[:300]}")
    message = choices[0].get("message") or {}
    text = (message.get("content") or "") + (message.get("reasoning_content") or "")
    tokens = int((answer.get("usage") or {}).get("completion_tokens") or 0)
    if not text.strip() or tokens < 1:
        raise CheckFailed(f"chat completion generated nothing: {str(answer)[:300]}")
    return tokens


def run(cfg: Config) -> str:
    print(f"server: {server_summary(cfg)}", flush=True)
    model = model_id(cfg)
    before = scrape_all(cfg) if cfg.pods_host else {}
    generated = 0
    for attempt in range(1, cfg.max_requests + 1):
        generated += chat(cfg, model)
        if not cfg.pods_host:
            return f"chat completion ok ({generated} tokens); exporter not enabled, not checked"
        after = scrape_all(cfg)
        new_lines = sum(
            s.decode_lines - before.get(a, Sample(0, 0, 0)).decode_lines for a, s in after.items()
        )
        if new_lines > 0:
            break
        print(f"request {attempt}: no new decode line at the exporters yet", flush=True)
    else:
        raise CheckFailed(
            f"{cfg.max_requests} completions ({generated} tokens) but no exporter saw a decode "
            "line: is the launcher writing profile.logging.file, and the exporter following it?"
        )
    if not cfg.speculative:
        return f"chat completion ok ({generated} tokens); {new_lines:.0f} decode lines seen"
    accept_sum = sum(
        s.accept_sum - before.get(a, Sample(0, 0, 0)).accept_sum for a, s in after.items()
    )
    accept_count = sum(
        s.accept_count - before.get(a, Sample(0, 0, 0)).accept_count for a, s in after.items()
    )
    if accept_count <= 0:
        raise CheckFailed(
            "decode lines were parsed but none carried an accept length: "
            "is speculative decoding really on?"
        )
    mean = accept_sum / accept_count
    if not mean > cfg.floor:
        raise CheckFailed(
            f"mean accept length {mean:.2f} over {accept_count:.0f} decode windows is not above "
            f"the floor {cfg.floor}: the drafter's tokens are rejected (EAGLE instead of EAGLE3, "
            "or a drafter that does not match the target)"
        )
    return (
        f"chat completion ok ({generated} tokens); mean accept length {mean:.2f} over "
        f"{accept_count:.0f} decode windows > floor {cfg.floor}"
    )


def main() -> int:
    cfg = load_config(dict(os.environ))
    # Error details quote the server's answers: nothing printed may carry the key.
    redactor = Redactor([cfg.api_key])
    try:
        print(redactor.redact_text(run(cfg)), flush=True)
    except CheckFailed as exc:
        print(redactor.redact_text(f"FAILED: {exc}"), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
