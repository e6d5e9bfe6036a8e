"""results.json: build, validate against results.schema.json, load, compare with a baseline."""

from __future__ import annotations

import json
import platform
import socket
import sys
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from specserve.bench.server import ServerFacts

SCHEMA_VERSION = 2


class ResultError(ValueError):
    """A result file is unreadable or not a `specserve bench` result."""


@cache
def result_schema() -> dict[str, Any]:
    text = (resources.files("specserve.bench") / "results.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_result(doc: Any, source: str = "result") -> None:
    """Raise ResultError naming the first field that breaks the documented structure."""
    validator = jsonschema.Draft202012Validator(
        result_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    problem = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if problem is not None:
        where = "/".join(str(p) for p in problem.absolute_path) or "(top level)"
        raise ResultError(f"{source}: {where}: {problem.message}")


def load_result(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise ResultError(
            f"{path}: not JSON ({exc}); give a results.json from specserve bench"
        ) from None
    validate_result(doc, str(path))
    result: dict[str, Any] = doc
    return result


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def build_result(
    label: str,
    url: str,
    settings: dict[str, Any],
    facts: ServerFacts,
    levels: list[dict[str, Any]],
    started_at: str,
) -> dict[str, Any]:
    version = facts.info.get("version")
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "specserve bench",
        "label": label,
        "started_at": started_at,
        "finished_at": now_iso(),
        "url": url,
        "settings": settings,
        "server": {
            "model": facts.model,
            "version": str(version) if version is not None else None,
            "standin": bool(facts.info.get("standin", False)),
            "speculative": facts.speculative,
            "info": facts.info,
        },
        "client": {
            "host": socket.gethostname(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "levels": levels,
        "baseline": None,
    }


def attach_baseline(result: dict[str, Any], baseline: dict[str, Any], file: str | None) -> None:
    """Record the baseline's aggregate tok/s and each level's speedup over it (same concurrency).

    A level the baseline did not measure (or measured with every request failing) gets
    speedup null rather than a guess.
    """
    agg = {str(level["concurrency"]): level["agg_tok_s"] for level in baseline["levels"]}
    result["baseline"] = {
        "label": baseline["label"],
        "file": file,
        "url": baseline["url"],
        "agg_tok_s": agg,
    }
    for level in result["levels"]:
        base = agg.get(str(level["concurrency"]))
        mine = level["agg_tok_s"]
        level["speedup"] = mine / base if mine is not None and base else None


def write_result(result: dict[str, Any], path: Path) -> None:
    validate_result(result, "results.json (about to be written)")
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
