"""One streaming OpenAI-compatible chat completion, timed chunk by chunk.

httpx, not requests: requests' `iter_lines` reads fixed-size blocks, so on a response without
chunked transfer encoding it would hold chunks back and distort TTFT and ITL; httpx yields
bytes as they arrive for both framings.

Token counts come from the final `usage` chunk (`stream_options.include_usage`), since with
speculative decoding one chunk carries several tokens. Without `usage` the chunk count is used
and the record says so.

SGLang's per-request speculative details come back on this route when the request asks
(`return_spec_tokens_details`, both verified versions: facts.request_spec_details of the
contract data): a chunk with empty choices and `sglext.spec_tokens_details`, before the usage
chunk. A server without speculation sends none; an OpenAI server other than SGLang ignores the
field. The streamed text is kept for the repetition measure (specserve/bench/degenerate.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from specserve.bench.promptset import Prompt


@dataclass
class RequestRecord:
    """What one request did. Times are seconds from the request's start."""

    prompt_id: str
    kind: str
    ok: bool = False
    status: int | None = None
    error: str | None = None
    ttft: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    latency: float | None = None
    output_tokens: int = 0
    tokens_from: str = "usage"
    finish_reason: str | None = None
    spec: dict[str, Any] | None = None
    """SGLang's SpecTokensDetails for this request; None when the server sent none."""
    text_parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def itls(self) -> list[float]:
        """Gaps between consecutive content chunks (one verify pass apart when speculating)."""
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:], strict=False)]

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first, over the time after the first: the speed a user sees."""
        if len(self.chunk_times) < 2 or self.output_tokens < 2:
            return None
        span = self.chunk_times[-1] - self.chunk_times[0]
        return (self.output_tokens - 1) / span if span > 0 else None


def chat_body(prompt: Prompt, model: str, max_tokens: int, temperature: float) -> dict[str, Any]:
    """The request: fixed output length (`ignore_eos`, SGLang's extension) and usage at the end."""
    return {
        "model": model,
        "messages": list(prompt.messages),
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_spec_tokens_details": True,
    }


def describe_http_error(url: str, status: int, body: str) -> str:
    """A message naming the URL, the status and what to do about it."""
    detail = body.strip().replace("\n", " ")[:200]
    if status == 401:
        return (
            f"{url} answered 401 Unauthorized: the server has --api-key set; pass "
            f"--api-key-file FILE or set SPECSERVE_API_KEY"
        )
    if status == 404:
        return f"{url} answered 404: is --url the server's base URL (http://HOST:PORT)? {detail}"
    if status == 503:
        return (
            f"{url} answered 503: the server is not ready (still warming up or shutting down); "
            f"wait for /health_generate to answer 200. {detail}"
        )
    if status >= 500:
        return f"{url} answered {status}: server error; check the server log. {detail}"
    return f"{url} answered {status}: {detail}"


def describe_transport_error(url: str, exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return (
            f"cannot connect to {url}: {exc}; is the server running and listening there? "
            "(SGLang refuses connections while it loads weights: wait for /health_generate to "
            "answer 200)"
        )
    if isinstance(exc, httpx.TimeoutException):
        return f"{url}: timed out ({type(exc).__name__}); raise --request-timeout or lower load"
    return f"{url}: {type(exc).__name__}: {exc}"


def _consume(record: RequestRecord, doc: dict[str, Any], now: float) -> None:
    if doc.get("object") == "error" or "error" in doc:
        message = doc.get("message") or doc.get("error") or doc
        record.error = f"error event in the stream: {message}"
        return
    usage = doc.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        record.output_tokens = usage["completion_tokens"]
        record.tokens_from = "usage"
    ext = doc.get("sglext")
    if isinstance(ext, dict) and isinstance(ext.get("spec_tokens_details"), dict):
        record.spec = ext["spec_tokens_details"]
    for choice in doc.get("choices") or []:
        delta = choice.get("delta") or {}
        # A reasoning model (Kimi with --reasoning-parser) streams its thinking first.
        if delta.get("content") or delta.get("reasoning_content"):
            record.text_parts.append(str(delta.get("content") or delta.get("reasoning_content")))
            if record.ttft is None:
                record.ttft = now
            record.chunk_times.append(now)
        if choice.get("finish_reason"):
            record.finish_reason = choice["finish_reason"]


def stream_chat(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    prompt: Prompt,
    headers: dict[str, str] | None = None,
) -> RequestRecord:
    """Send one streaming request (`headers` beside the client's); never raises for HTTP or
    transport problems."""
    record = RequestRecord(prompt_id=prompt.id, kind=prompt.kind, tokens_from="chunks")
    start = time.perf_counter()
    try:
        with client.stream("POST", url, json=body, headers=headers) as response:
            record.status = response.status_code
            if response.status_code != 200:
                response.read()
                record.error = describe_http_error(url, response.status_code, response.text)
                return record
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    doc = json.loads(data)
                except ValueError:
                    record.error = f"{url}: unreadable stream event {data[:80]!r}"
                    return record
                if isinstance(doc, dict):
                    _consume(record, doc, time.perf_counter() - start)
                if record.error:
                    return record
    except httpx.HTTPError as exc:
        record.error = describe_transport_error(url, exc)
        return record
    record.latency = time.perf_counter() - start
    if record.tokens_from == "chunks":
        record.output_tokens = len(record.chunk_times)
    if not record.chunk_times:
        record.error = f"{url}: the stream ended without any content"
        return record
    if record.finish_reason == "abort":
        record.error = f"{url}: the server aborted the request (finish_reason abort)"
        return record
    record.ok = True
    return record
