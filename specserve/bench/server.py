"""Before a run: can the server be reached, which model does it serve, how does it speculate."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from specserve.bench.client import describe_http_error, describe_transport_error
from specserve.secrets import MARKER, SECRET_FIELD, Redactor, secrets_in_server_info

# Server args whose values must never land in a result file that gets shared.
_SECRET = SECRET_FIELD
REDACTED = MARKER


class ServerError(RuntimeError):
    """The server cannot be benchmarked; the message names the URL and the fix."""


@dataclass(frozen=True)
class ServerFacts:
    model: str
    info: dict[str, Any]
    speculative: dict[str, Any] | None


def redact(info: dict[str, Any], secrets: Iterable[str | None] = ()) -> dict[str, Any]:
    """Secret-named fields replaced, then every secret's value wherever else it appears
    (SGLang's `launch_command` carries `--api-key KEY`): the given secrets and those the info
    itself reveals."""
    by_value = Redactor([*secrets, *secrets_in_server_info(info)])
    return {
        k: (REDACTED if _SECRET.search(k) and v not in (None, "") else by_value.redact_value(v))
        for k, v in info.items()
    }


def redact_result(result: dict[str, Any], secrets: Iterable[str | None] = ()) -> dict[str, Any]:
    """A whole result (or any JSON value) with the given secrets and those its server info
    reveals removed by value: what goes into results.json, results.md and the plot's titles."""
    info = (result.get("server") or {}).get("info") or {}
    redacted: dict[str, Any] = Redactor([*secrets, *secrets_in_server_info(info)]).redact_value(
        result
    )
    return redacted


def speculative_params(info: dict[str, Any]) -> dict[str, Any] | None:
    """The speculative settings from /server_info, None when the server does not speculate."""
    algorithm = info.get("speculative_algorithm")
    if not algorithm:
        return None
    return {
        "algorithm": algorithm,
        "num_steps": info.get("speculative_num_steps"),
        "eagle_topk": info.get("speculative_eagle_topk"),
        "num_draft_tokens": info.get("speculative_num_draft_tokens"),
        "draft_model_path": info.get("speculative_draft_model_path"),
    }


def _get(client: httpx.Client, url: str) -> httpx.Response:
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        raise ServerError(describe_transport_error(url, exc)) from None
    if response.status_code != 200:
        raise ServerError(describe_http_error(url, response.status_code, response.text))
    return response


# SGLang's name first; the deprecated /get_server_info alias (it logs a warning on every call)
# only for a server too old to know the new name, i.e. one that answers 404.
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")


def server_info(client: httpx.Client, base_url: str) -> dict[str, Any]:
    """SGLang's /server_info, or /get_server_info where the server predates the new name."""
    new, old = (f"{base_url}{path}" for path in SERVER_INFO_PATHS)
    try:
        response = client.get(new)
    except httpx.HTTPError as exc:
        raise ServerError(describe_transport_error(new, exc)) from None
    url = new
    if response.status_code == 404:
        url, response = old, _get(client, old)
    elif response.status_code != 200:
        raise ServerError(describe_http_error(new, response.status_code, response.text))
    try:
        info = response.json()
    except ValueError:
        raise ServerError(f"{url} did not answer JSON") from None
    if not isinstance(info, dict):
        raise ServerError(f"{url} did not answer a JSON object")
    return info


def probe(
    client: httpx.Client, base_url: str, model: str | None, secrets: Iterable[str | None] = ()
) -> ServerFacts:
    """Ask /v1/models (which needs the API key, so a bad key fails here) and /server_info."""
    models = _get(client, f"{base_url}/v1/models").json()
    served = [m.get("id") for m in models.get("data") or [] if isinstance(m, dict)]
    if model is None:
        if not served:
            raise ServerError(f"{base_url}/v1/models lists no model; pass --model NAME")
        model = str(served[0])
    info = server_info(client, base_url)
    secrets = [*secrets, *secrets_in_server_info(info)]
    spec = speculative_params(info)
    return ServerFacts(
        model=model,
        info=redact(info, secrets),
        speculative=Redactor(secrets).redact_value(spec),
    )
