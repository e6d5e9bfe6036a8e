"""Request parsing and response bodies for SGLang's native and OpenAI-compatible endpoints."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from specserve.standin.engine import Request, natural_length

DEFAULT_MAX_TOKENS = 128


class BadRequest(ValueError):
    """The request body is unusable; the message says which field and why."""


def _no_constant(name: str) -> Any:
    # orjson, which SGLang parses the header with, refuses NaN and Infinity; json would not.
    raise ValueError(f"{name} is not JSON")


def extract_custom_labels(
    header_of: Callable[[str], str | None], allowed: tuple[str, ...], header: str
) -> dict[str, Any] | None:
    """SGLang's OpenAIServingBase.extract_custom_labels (serving_base.py, 0.5.21 and 0.5.23):
    the JSON object of `header` with only the `allowed` names kept, values as sent; None when
    no label is allowed, the header is absent or empty, or it is not JSON (SGLang logs and
    drops it) or not an object; {} for an object without an allowed name. `header_of` is the
    request's case-insensitive header lookup."""
    if not allowed or not header:
        return None
    raw = header_of(header)
    try:
        labels = json.loads(raw, parse_constant=_no_constant) if raw else None
    except ValueError:
        labels = None
    if not isinstance(labels, dict):
        return None
    return {name: value for name, value in labels.items() if name in allowed}


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # OpenAI content parts: keep the text parts.
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    if content is None:
        return ""
    raise BadRequest("messages[].content must be a string or a list of content parts")


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: about one token per four characters, at least one."""
    return max(1, (len(text) + 3) // 4)


def _max_tokens(value: object, field: str) -> int:
    if value is None:
        return DEFAULT_MAX_TOKENS
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{field}' must be a positive integer, got {value!r}")
    return value


def chat_request(body: dict[str, Any], content_factor_of: Any) -> tuple[Request, bool, bool]:
    """(request, stream, include_usage) for /v1/chat/completions."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
    texts: list[str] = []
    last_user = ""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise BadRequest(f"messages[{i}] must be an object with a 'role'")
        text = _text_of(message.get("content"))
        texts.append(text)
        if message["role"] == "user":
            last_user = text
    limit_field = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    max_tokens = _max_tokens(body.get(limit_field), limit_field)
    joined = "\n".join(texts)
    ignore_eos = bool(body.get("ignore_eos", False))
    req = Request(
        text=joined,
        prompt_tokens=sum(count_tokens(t) + 4 for t in texts) + 2,
        max_new_tokens=max_tokens,
        natural_tokens=None if ignore_eos else natural_length(joined),
        content_factor=content_factor_of(last_user),
    )
    stream = bool(body.get("stream", False))
    req.stream = stream
    options = body.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    return req, stream, include_usage


def generate_request(body: dict[str, Any], content_factor_of: Any) -> tuple[Request, bool]:
    """(request, stream) for SGLang's native /generate."""
    text = body.get("text")
    if isinstance(text, list):
        raise BadRequest("batched 'text' lists are not supported by the stand-in; send one")
    if not isinstance(text, str):
        raise BadRequest("'text' must be a string (input_ids are not supported by the stand-in)")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise BadRequest("'sampling_params' must be an object")
    max_new = _max_tokens(params.get("max_new_tokens"), "sampling_params.max_new_tokens")
    ignore_eos = bool(params.get("ignore_eos", False))
    req = Request(
        text=text,
        prompt_tokens=count_tokens(text),
        max_new_tokens=max_new,
        natural_tokens=None if ignore_eos else natural_length(text),
        content_factor=content_factor_of(text),
    )
    req.stream = bool(body.get("stream", False))
    return req, req.stream


def spec_meta_info(req: Request) -> dict[str, Any]:
    """The per-request speculative details SGLang adds to a finished request's meta_info.

    A mirror of TokenizerManager._calculate_spec_decoding_metrics (0.5.21 and 0.5.23 alike;
    tests/contract/test_request_spec_details.py runs the real method on the same counts):
    only under a speculative algorithm and after at least one verify pass; accept rate =
    correct drafts / (verify passes x (draft tokens - 1)), the bonus token left out; accept
    length = completion tokens / verify passes, so the prefill's first token counts too;
    the histogram only when non-empty. DSPARK's cap and block figures are left out.
    """
    drafts = req.spec_num_draft_tokens
    if drafts is None or req.spec_verify_ct <= 0:
        return {}
    out: dict[str, Any] = {}
    proposed = req.spec_verify_ct * (drafts - 1)
    if proposed > 0:
        out["spec_accept_rate"] = req.spec_num_correct_drafts / proposed
        out["spec_accept_length"] = req.generated / req.spec_verify_ct
        out["spec_num_correct_drafts"] = req.spec_num_correct_drafts
        out["spec_num_proposed_drafts"] = proposed
        out["spec_verify_ct"] = req.spec_verify_ct
    if req.spec_correct_drafts_histogram:
        out["spec_correct_drafts_histogram"] = list(req.spec_correct_drafts_histogram)
    return out


# SpecTokensDetails (entrypoints/openai/protocol.py): every field, zero when meta_info lacks it
# (spec_tokens_details_from_meta_info's `or 0`).
_SPEC_TOKENS_DETAILS: dict[str, Any] = {
    "spec_accept_rate": 0.0,
    "spec_accept_length": 0.0,
    "spec_cap_length": 0.0,
    "spec_block_accept_length": 0.0,
    "spec_num_correct_drafts": 0,
    "spec_num_proposed_drafts": 0,
    "spec_verify_ct": 0,
    "spec_correct_drafts_histogram": [],
    "spec_cap_lens_histogram": [],
}


def wants_spec_details(body: dict[str, Any]) -> bool:
    """The OpenAI routes' switch (`return_spec_tokens_details`, off by default)."""
    return bool(body.get("return_spec_tokens_details", False))


def sglext(req: Request) -> dict[str, Any] | None:
    """The response-level `sglext` carrying SpecTokensDetails; None when meta_info has none
    (spec_tokens_details_from_meta_info returns None: no sglext is written)."""
    meta = spec_meta_info(req)
    if not meta:
        return None
    details = {key: meta.get(key) or default for key, default in _SPEC_TOKENS_DETAILS.items()}
    return {
        "routed_experts": None,
        "cached_tokens_details": None,
        "spec_tokens_details": details,
        "input_ids": None,
        "output_ids": None,
    }


def sglext_chunk(cid: str, model: str, ext: dict[str, Any]) -> dict[str, Any]:
    """The stream's sglext event: choices empty, sent before the usage chunk (serving_chat)."""
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": None,
        "sglext": ext,
    }


def usage(req: Request) -> dict[str, Any]:
    return {
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": req.generated,
        "total_tokens": req.prompt_tokens + req.generated,
        "prompt_tokens_details": None,
    }


def chat_id() -> str:
    return uuid.uuid4().hex


def chat_response(req: Request, model: str, text: str, cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": None,
                    "tool_calls": None,
                },
                "logprobs": None,
                "finish_reason": req.finish_reason,
                "matched_stop": None,
            }
        ],
        "usage": usage(req),
    }


def chat_chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def usage_chunk(cid: str, model: str, req: Request) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage(req),
    }


def generate_response(req: Request, text: str, e2e: float) -> dict[str, Any]:
    finish: dict[str, Any] = {"type": req.finish_reason}
    if req.finish_reason == "length":
        finish["length"] = req.generated
    return {
        "text": text,
        "output_ids": [(req.seed + i * 31) % 32000 for i in range(req.generated)],
        "meta_info": {
            "id": req.rid,
            "finish_reason": finish,
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.generated,
            "cached_tokens": 0,
            "e2e_latency": e2e,
            **(spec_meta_info(req) if req.finish_reason is not None else {}),
        },
    }


def error_body(message: str, code: int, kind: str = "BadRequestError") -> dict[str, Any]:
    """SGLang's OpenAI-style error object."""
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}
