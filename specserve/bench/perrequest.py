"""A level's per-request sections: each request's speculative details and repetition, the
acceptance distributions they make (acceptance.py) and the degenerate requests (degenerate.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specserve.bench import acceptance, degenerate
from specserve.bench.client import RequestRecord


def request_row(record: RequestRecord) -> dict[str, Any]:
    """One request's entry in the level's `per_request`: its class, SGLang's speculative
    details (accept length, verify passes, the per-step histogram) and its repetition."""
    spec = record.spec or {}
    score = degenerate.repetition(record.text)
    return {
        "prompt_id": record.prompt_id,
        "kind": record.kind,
        "output_tokens": record.output_tokens,
        "accept_length": spec.get("spec_accept_length") if spec.get("spec_verify_ct") else None,
        "accept_rate": spec.get("spec_accept_rate") if spec.get("spec_verify_ct") else None,
        "verify_ct": spec.get("spec_verify_ct") or None,
        "histogram": list(spec.get("spec_correct_drafts_histogram") or []),
        "repetition": score,
        "degenerate": degenerate.is_degenerate(score),
    }


def degenerate_section(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How many of the level's requests looped, and which."""
    judged = [r for r in rows if r["repetition"] is not None]
    flagged = [r for r in judged if r["degenerate"]]
    return {
        "measure": f"seq-rep-{degenerate.N}",
        "threshold": degenerate.THRESHOLD,
        "judged": len(judged),
        "count": len(flagged),
        "share": len(flagged) / len(judged) if judged else None,
        "prompt_ids": sorted({r["prompt_id"] for r in flagged}),
    }


def level_sections(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """`per_request`, `acceptance` and `degenerate` of a level, over its successful requests."""
    rows = [request_row(r) for r in records if r.ok]
    return {
        "per_request": rows,
        "acceptance": acceptance.summarize(rows),
        "degenerate": degenerate_section(rows),
    }
