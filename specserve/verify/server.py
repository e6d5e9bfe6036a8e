"""The gate's requests to the server: health, what it runs, and the warm-up traffic whose decode
lines the exporter must see."""

from __future__ import annotations

import json
from typing import Any

import requests

from specserve.profile.endpoints import HEALTH_PATH
from specserve.secrets import Redactor, secrets_in_server_info

__all__ = ["APIS", "HEALTH_PATH", "SERVER_INFO_PATHS", "RequestFailed", "call",
           "draft_tokens_of", "model_id", "server_info", "summary", "warm_up",
           "why_no_decode_lines"]
# SGLang's name first; its deprecated alias (a warning in SGLang's log on every call) only when
# the server is too old to know the new name and answers 404.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
# The two request shapes: SGLang's native /generate (what the Ansible gate has always sent)
# and the OpenAI API (what a router in front of several servers answers).
APIS = ("generate", "chat")


class RequestFailed(Exception):
    """A request to the server failed; the message says which, and `status` the HTTP status."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def call(session: requests.Session, url: str, timeout: float,
         body: dict[str, Any] | None = None) -> Any:
    """GET (or POST `body`) and return the JSON answer, or None when it is not JSON."""
    try:
        if body is None:
            response = session.get(url, timeout=timeout)
        else:
            response = session.post(url, json=body, timeout=timeout)
    except requests.Timeout:
        raise RequestFailed(f"{url}: no answer within {timeout:g} s") from None
    except requests.RequestException as exc:
        raise RequestFailed(f"{url}: {exc}") from None
    if response.status_code != 200:
        detail = response.text[:200].strip()
        raise RequestFailed(f"{url}: HTTP {response.status_code} {detail}", response.status_code)
    try:
        return response.json()
    except ValueError:
        return None


def server_info(session: requests.Session, base: str) -> dict[str, Any] | str:
    """/server_info (the resolved server arguments, secrets included as SGLang serves them),
    or why it could not be read."""
    info: Any = None
    try:
        for path in SERVER_INFO_PATHS:
            try:
                info = call(session, base + path, timeout=10)
                break
            except RequestFailed as exc:
                if exc.status != 404:
                    raise
    except RequestFailed as exc:
        return f"/server_info not readable here ({str(exc)[:120]})"
    if not isinstance(info, dict):
        return "/server_info did not answer a JSON object"
    return info


def summary(info: dict[str, Any] | str, api_key: str | None) -> str:
    """What the server runs, from its server_info, with every secret removed by value."""
    if isinstance(info, str):
        return info
    clean = Redactor([api_key, *secrets_in_server_info(info)]).redact_value(info)
    standin = " (stand-in)" if clean.get("standin") else ""
    return (f"SGLang {clean.get('version', '?')}{standin}, speculative algorithm "
            f"{clean.get('speculative_algorithm') or 'none'}, launch command: "
            f"{clean.get('launch_command') or '?'}")


def why_no_decode_lines(info: dict[str, Any] | str, max_tokens: int) -> str | None:
    """The server setting that keeps its Decode batch lines out of the log, from server_info:
    a log level above INFO (metrics_reporter.py writes them with logger.info), or a
    --decode-log-interval longer than one warm-up request decodes. None: none that it says."""
    from specserve.profile.checks.logs import silences_batch_lines

    if isinstance(info, str):
        return None
    level, interval = info.get("log_level"), info.get("decode_log_interval")
    if isinstance(level, str) and silences_batch_lines(level):
        return (f"the server's log level is {level} (server_info log_level): SGLang writes its "
                "Decode batch lines at INFO, so it prints none")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > max_tokens:
        return (f"the server's decode_log_interval is {interval} (server_info): one Decode "
                f"batch line per {interval} decode steps, and a warm-up request decodes "
                f"{max_tokens} tokens")
    return None


def draft_tokens_of(info: dict[str, Any] | str) -> int | None:
    """speculative_num_draft_tokens the server resolved, from server_info."""
    value = None if isinstance(info, str) else info.get("speculative_num_draft_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_id(session: requests.Session, base: str, timeout: float) -> str:
    models = call(session, base + "/v1/models", timeout)
    data = (models or {}).get("data") if isinstance(models, dict) else None
    if not data:
        raise RequestFailed(f"{base}/v1/models lists no model: {str(models)[:200]}")
    return str(data[0]["id"])


def warm_up(session: requests.Session, base: str, api: str, prompt: str, max_tokens: int,
            timeout: float, model: str = "") -> None:
    """One request that decodes `max_tokens` tokens (ignore_eos: enough decode lines)."""
    if api == "generate":
        answer = call(session, base + "/generate", timeout, {
            "text": prompt,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0,
                                "ignore_eos": True},
        })
        text = answer.get("text", "") if isinstance(answer, dict) else ""
    else:
        answer = call(session, base + "/v1/chat/completions", timeout, {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,  # SGLang's extension
        })
        choices = answer.get("choices") if isinstance(answer, dict) else None
        message = (choices or [{}])[0].get("message") or {}
        text = (message.get("content") or "") + (message.get("reasoning_content") or "")
    if not str(text).strip():
        raise RequestFailed(f"{base}: the answer generated nothing: {json.dumps(answer)[:200]}")
