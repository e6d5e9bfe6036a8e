"""The candidates of a tuning run: no speculation, the grid, the adaptive chain and the other
methods, each judged by the same rules as `specserve check` (schema, then every check of
`check --configs-only`), so a refused one is reported as invalid and never run."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from specserve.profile.algorithms import document_speculates
from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.model import profile_from_document
from specserve.profile.schema import schema_issues
from specserve.profile.variants import speculative_max_running_requests
from specserve.tune.edit import NO_DRAFTER, TREE, load_document, profile_edit
from specserve.tune.errors import TuneError

# A draft-token entry that follows the step count: the only value top-k 1 allows.
CHAIN = "steps+1"
NO_SPEC = "no-spec"
ADAPTIVE = "adaptive"


def point_id(point: dict[str, Any]) -> str:
    """`s3-k1-d4` (steps, top-k, draft tokens), with the NCCL preset when it has one."""
    ident = f"s{point['num_steps']}-k{point['eagle_topk']}-d{point['num_draft_tokens']}"
    return ident + (f"-{point['nccl_preset']}" if point.get("nccl_preset") else "")


def _draft_values(grid: dict[str, Any]) -> list[Any]:
    values = grid.get("num_draft_tokens")
    return list(values) if values else [CHAIN]


def expand(grid: dict[str, Any], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's lists, then the explicit points."""
    unknown = set(grid) - {*TREE, "nccl_preset"}
    if unknown:
        raise TuneError(
            f"tune_grid: unknown key(s) {sorted(unknown)}; use num_steps, eagle_topk, "
            "num_draft_tokens (integers or 'steps+1') and optionally nccl_preset"
        )
    for key in ("num_steps", "eagle_topk"):
        if not grid.get(key):
            raise TuneError(f"tune_grid.{key} must be a non-empty list, e.g. [1, 2, 3]")
    presets = list(grid.get("nccl_preset") or [None])
    points: list[dict[str, Any]] = []
    for steps, topk, draft, preset in itertools.product(
        grid["num_steps"], grid["eagle_topk"], _draft_values(grid), presets
    ):
        draft_tokens = int(steps) + 1 if draft == CHAIN else draft
        points.append({"num_steps": steps, "eagle_topk": topk,
                       "num_draft_tokens": draft_tokens, "nccl_preset": preset})
    for item in extra:
        missing = [k for k in TREE if k not in item]
        if missing:
            raise TuneError(f"tune_points entry {dict(item)} lacks {missing}")
        points.append({**{k: item[k] for k in TREE}, "nccl_preset": item.get("nccl_preset")})
    return points


def problems(text: str, point: dict[str, Any], source: Path) -> list[str]:
    """Errors `specserve check --configs-only` would report for the profile at this point."""
    if point.get("speculative", True) and "drafter" not in point:
        for key in TREE:
            if not isinstance(point[key], int) or isinstance(point[key], bool):
                return [f"{key} {point[key]!r} is not an integer"]
    doc = load_document(profile_edit(text, speculative=point))
    issues = schema_issues(doc)
    if not issues:
        profile = profile_from_document(doc, source_path=source)
        issues = run_checks(profile, CheckOptions(configs_only=True))
    return [f"{i.field}: {i.problem} (fix: {i.fix})" for i in issues if i.severity == "error"]


def _adaptive_point(doc: Any) -> dict[str, Any]:
    """The profile's chain with SGLang's run-time step adaptation on (top-k 1 only)."""
    steps = (doc.get("drafter") or {}).get("num_steps")
    point: dict[str, Any] = {"id": ADAPTIVE, "adaptive": True}
    if not isinstance(steps, int) or isinstance(steps, bool):
        return {**point, "num_steps": steps, "eagle_topk": 1, "num_draft_tokens": None,
                "valid": False,
                "reason": "drafter.num_steps is not set in the profile: the adaptive candidate "
                          "starts from the profile's step count (fix: set drafter.num_steps)"}
    return {**point, "num_steps": steps, "eagle_topk": 1, "num_draft_tokens": steps + 1}


def method_points(methods: list[Any]) -> list[dict[str, Any]]:
    """Other speculative methods to rank beside the grid (tune_methods): each a whole drafter
    block (`{algorithm: NGRAM}`, `{algorithm: DSPARK, path: ..., dspark_block_size: 7}`), its
    id the algorithm's name in lower case (numbered when one appears twice)."""
    points: list[dict[str, Any]] = []
    for method in methods:
        if not isinstance(method, dict) or not isinstance(method.get("algorithm"), str):
            raise TuneError(
                f"tune_methods entry {method!r} is not a drafter block: give a mapping with "
                "`algorithm` (and the drafter keys that method takes, as in the profile's "
                "drafter), e.g. {algorithm: NGRAM}"
            )
        algorithm = method["algorithm"].lower()
        if algorithm == "none":
            raise TuneError(
                "tune_methods: `algorithm: none` is the no-speculation candidate, which every "
                "sweep runs already; leave it out"
            )
        ident = algorithm
        taken = {p["id"] for p in points}
        n = 2
        while ident in taken:
            ident, n = f"{algorithm}-{n}", n + 1
        # Plain types: Ansible's tagged strings are not something ruamel.yaml can write.
        points.append({"id": ident, "drafter": json.loads(json.dumps(method))})
    return points


def tune_points(
    grid: dict[str, Any],
    profile_path: str | Path,
    extra: list[dict[str, Any]] | None = None,
    adaptive: bool = False,
    methods: list[Any] | None = None,
) -> list[dict[str, Any]]:
    """The candidates: no speculation first, then every grid point (product of the lists, then
    `extra`), then (adaptive) the profile's chain with `drafter.adaptive`, then the other
    methods (`methods`, else the profile's `tuning.methods`: whole drafter blocks, judged like
    the rest). Each has an id, `speculative`, the `max_running_requests` every candidate runs
    with (the profile's, else SGLang's cap under speculation: the same for all, so no candidate
    admits more concurrent requests than another) and, when `specserve check` would refuse the
    profile at that point, `valid: false` and why."""
    source = Path(profile_path).resolve()
    text = source.read_text(encoding="utf-8")
    doc = load_document(text)
    if not document_speculates(doc):
        raise TuneError(NO_DRAFTER)
    cap = speculative_max_running_requests(doc)
    candidates: list[dict[str, Any]] = [{"id": NO_SPEC, "speculative": False}]
    for point in expand(grid, list(extra or [])):
        candidates.append({**{k: v for k, v in point.items() if k != "nccl_preset" or v},
                           "id": point_id(point)})
    if adaptive:
        candidates.append(_adaptive_point(doc))
    # tune_methods, else the methods the profile names (tuning.methods).
    if not methods:
        methods = (doc.get("tuning") or {}).get("methods") or []
    candidates.extend(method_points(list(methods)))
    seen: set[str] = set()
    result: list[dict[str, Any]] = []
    for point in candidates:
        if point["id"] in seen:
            continue
        seen.add(point["id"])
        point = {"speculative": True, **point, "max_running_requests": cap}
        found = [point["reason"]] if "reason" in point else problems(text, point, source)
        result.append({**point, "valid": not found, "reason": "; ".join(found)})
    return result
