"""Profile edits for the baseline and tuning playbooks, and the tuning grid.

Ansible never renders the SGLang command line: a baseline or a grid point is the deployment
profile with its speculative parameters (or baseline block) changed, and the launcher renders
it as for any other profile. The edit keeps the file's comments and key order (ruamel.yaml round
trip) because the result is written back into the user's profile. Grid points are judged by the
same rules as `specserve check` (schema, then every check of `check --configs-only`).
"""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from specserve.buckets import concurrency_bucket

try:
    from specserve.profile.checks import CheckOptions, run_checks
    from specserve.profile.facts import document_speculates
    from specserve.profile.likeness import SETTINGS as BASELINE_SETTINGS
    from specserve.profile.model import profile_from_document
    from specserve.profile.schema import schema_issues
    from specserve.profile.variants import speculative_max_running_requests
except ImportError:  # pragma: no cover - depends on how ansible-playbook was started
    run_checks = None  # type: ignore[assignment]

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - unit tests import this without Ansible
    AnsibleFilterError = ValueError  # type: ignore[assignment,misc]

TREE = ("num_steps", "eagle_topk", "num_draft_tokens")
# A draft-token entry that follows the step count: the only value top-k 1 allows.
CHAIN = "steps+1"


def _yaml() -> YAML:
    yaml = YAML()  # round trip: comments, order and quoting survive
    yaml.preserve_quotes = True
    yaml.width = 100
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _load(text: str) -> Any:
    doc = _yaml().load(text)
    if not isinstance(doc, dict):
        raise AnsibleFilterError("the profile is not a YAML mapping")
    return doc


def _dump(doc: Any) -> str:
    out = io.StringIO()
    _yaml().dump(doc, out)
    return out.getvalue()


def profile_edit(
    text: str,
    speculative: dict[str, Any] | str | None = None,
    baseline: dict[str, Any] | None = None,
    drop_baseline: bool = False,
) -> str:
    """`text` (a profile) with its speculation switched off or retuned, and/or a new baseline.

    speculative: "off" removes the drafter block (the baseline: the same profile, no
    speculation) with server.max_running_requests pinned to the speculative run's; a mapping
    sets drafter.num_steps / eagle_topk / num_draft_tokens and, when it has `nccl_preset`,
    nccl.preset. baseline: the `baseline` block (`specserve bench
    baseline-from` output, with or without its `baseline:` key) replaces the profile's.
    A tuning point (a mapping with `speculative: false`) is the same as "off"; one with
    `max_running_requests` pins server.max_running_requests to it and one with `adaptive`
    sets drafter.adaptive; one with `drafter` (another method, tune_methods) replaces the
    drafter block with it. drop_baseline removes the `baseline` block.
    """
    doc = _load(text)
    if isinstance(speculative, dict) and speculative.get("speculative") is False:
        speculative = "off"
    if speculative == "off":
        # Like for like: the baseline runs with the running-request cap the speculative server
        # has (its own value, else the 48 SGLang applies under speculation), not uncapped.
        cap = speculative_max_running_requests(doc)
        doc.pop("drafter", None)
        if cap is not None:
            if not isinstance(doc.get("server"), dict):
                doc["server"] = {}
            doc["server"]["max_running_requests"] = cap
    elif isinstance(speculative, dict) and isinstance(speculative.get("drafter"), dict):
        # Another method (tune_methods): its drafter block whole, nothing of the profile's tree.
        if not document_speculates(doc):
            raise AnsibleFilterError(
                "the profile has no drafter to tune: set drafter (algorithm, path) first"
            )
        doc["drafter"] = CommentedMap(json.loads(json.dumps(speculative["drafter"])))
        _drop_comments(doc, "drafter")
        _pin_running(doc, speculative.get("max_running_requests"))
    elif isinstance(speculative, dict):
        if not document_speculates(doc):
            raise AnsibleFilterError(
                "the profile has no drafter to tune: set drafter (algorithm, path) first"
            )
        for key in TREE:
            if key in speculative:
                doc["drafter"][key] = int(speculative[key])
        if "adaptive" in speculative:
            doc["drafter"]["adaptive"] = bool(speculative["adaptive"])
        preset = speculative.get("nccl_preset")
        if preset:
            doc.setdefault("nccl", {})["preset"] = str(preset)
        _pin_running(doc, speculative.get("max_running_requests"))
    elif speculative is not None:
        raise AnsibleFilterError(f"speculative must be 'off' or a mapping, not {speculative!r}")
    if drop_baseline:
        doc.pop("baseline", None)
        _drop_comments(doc, "baseline")
    if baseline is not None:
        block = baseline.get("baseline", baseline)
        recorded = CommentedMap({
            "gen_throughput_tok_s": {
                str(k): round(float(v), 1) for k, v in block["gen_throughput_tok_s"].items()
            },
            "source": str(block.get("source", "")),
            # What it was measured with, when the block records it (check compares them).
            **{key: block[key] for key in BASELINE_SETTINGS if key in block},
        })
        # The old block's comments described the old values ("No recorded settings (a copy, not
        # a measurement)" above the shipped figure): they go with them.
        _drop_comments(doc, "baseline")
        if any(key in block for key in BASELINE_SETTINGS):
            recorded.yaml_set_start_comment(MEASURED_COMMENT, indent=2)
        doc["baseline"] = recorded
    return _dump(doc)


MEASURED_COMMENT = (
    "Measured by `specserve bench` (playbooks/baseline.yml), with the settings it was measured\n"
    "with recorded below; `check` compares them with this profile (docs/tuning.md)."
)


def _drop_comments(doc: Any, key: str) -> None:
    """Forget the comments ruamel.yaml keeps for `key`'s block (the lines between `key:` and
    its first entry, and the block's own)."""
    items = getattr(getattr(doc, "ca", None), "items", None)
    if isinstance(items, dict):
        items.pop(key, None)


def _pin_running(doc: Any, cap: Any) -> None:
    """server.max_running_requests = cap (a tuning point's, the same for every point)."""
    if cap is None:
        return
    if not isinstance(doc.get("server"), dict):
        doc["server"] = {}
    doc["server"]["max_running_requests"] = int(cap)


def _point_id(point: dict[str, Any]) -> str:
    ident = f"s{point['num_steps']}-k{point['eagle_topk']}-d{point['num_draft_tokens']}"
    return ident + (f"-{point['nccl_preset']}" if point.get("nccl_preset") else "")


def _draft_values(grid: dict[str, Any]) -> list[Any]:
    values = grid.get("num_draft_tokens")
    return list(values) if values else [CHAIN]


def _expand(grid: dict[str, Any], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    unknown = set(grid) - {*TREE, "nccl_preset"}
    if unknown:
        raise AnsibleFilterError(
            f"tune_grid: unknown key(s) {sorted(unknown)}; use num_steps, eagle_topk, "
            "num_draft_tokens (integers or 'steps+1') and optionally nccl_preset"
        )
    for key in ("num_steps", "eagle_topk"):
        if not grid.get(key):
            raise AnsibleFilterError(f"tune_grid.{key} must be a non-empty list, e.g. [1, 2, 3]")
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
            raise AnsibleFilterError(f"tune_points entry {dict(item)} lacks {missing}")
        points.append({**{k: item[k] for k in TREE}, "nccl_preset": item.get("nccl_preset")})
    return points


def _problems(text: str, point: dict[str, Any], source: Path) -> list[str]:
    """Errors `specserve check --configs-only` would report for the profile at this point."""
    if point.get("speculative", True) and "drafter" not in point:
        for key in TREE:
            if not isinstance(point[key], int) or isinstance(point[key], bool):
                return [f"{key} {point[key]!r} is not an integer"]
    doc = _load(profile_edit(text, speculative=point))
    issues = schema_issues(doc)
    if not issues:
        profile = profile_from_document(doc, source_path=source)
        issues = run_checks(profile, CheckOptions(configs_only=True))
    return [f"{i.field}: {i.problem} (fix: {i.fix})" for i in issues if i.severity == "error"]


NO_SPEC = "no-spec"
ADAPTIVE = "adaptive"


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


def _method_points(methods: list[Any]) -> list[dict[str, Any]]:
    """Other speculative methods to rank beside the grid (tune_methods): each a whole drafter
    block (`{algorithm: NGRAM}`, `{algorithm: DSPARK, path: ..., dspark_block_size: 7}`), its
    id the algorithm's name in lower case (numbered when one appears twice)."""
    points: list[dict[str, Any]] = []
    for method in methods:
        if not isinstance(method, dict) or not isinstance(method.get("algorithm"), str):
            raise AnsibleFilterError(
                f"tune_methods entry {method!r} is not a drafter block: give a mapping with "
                "`algorithm` (and the drafter keys that method takes, as in the profile's "
                "drafter), e.g. {algorithm: NGRAM}"
            )
        algorithm = method["algorithm"].lower()
        if algorithm == "none":
            raise AnsibleFilterError(
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
    profile_path: str,
    extra: list[dict[str, Any]] | None = None,
    adaptive: bool = False,
    methods: list[Any] | None = None,
) -> list[dict[str, Any]]:
    """The candidates: no speculation first, then every grid point (product of the lists, then
    `extra`), then (adaptive) the profile's chain with `drafter.adaptive`, then the other
    methods (`methods`, else the profile's `tuning.methods`: whole drafter blocks, judged like
    the rest). Each has an id,
    `speculative`, the `max_running_requests` every candidate runs with (the profile's, else
    SGLang's cap under speculation: the same for all, so no candidate admits more concurrent
    requests than another) and, when `specserve check` would refuse the profile at that point,
    `valid: false` and why."""
    if run_checks is None:
        raise AnsibleFilterError(
            "the specserve Python package is not importable by ansible-playbook: run it from the "
            "repository's virtual environment (.venv/bin/ansible-playbook)"
        )
    source = Path(profile_path).resolve()
    text = source.read_text(encoding="utf-8")
    doc = _load(text)
    if not document_speculates(doc):
        raise AnsibleFilterError(
            "the profile has no drafter to tune: set drafter (algorithm, path) first"
        )
    cap = speculative_max_running_requests(doc)
    candidates: list[dict[str, Any]] = [{"id": NO_SPEC, "speculative": False}]
    for point in _expand(grid, list(extra or [])):
        candidates.append({**{k: v for k, v in point.items() if k != "nccl_preset" or v},
                           "id": _point_id(point)})
    if adaptive:
        candidates.append(_adaptive_point(doc))
    # tune_methods, else the methods the profile names (tuning.methods).
    if not methods:
        methods = (doc.get("tuning") or {}).get("methods") or []
    candidates.extend(_method_points(list(methods)))
    seen: set[str] = set()
    result: list[dict[str, Any]] = []
    for point in candidates:
        if point["id"] in seen:
            continue
        seen.add(point["id"])
        point = {"speculative": True, **point, "max_running_requests": cap}
        problems = [point["reason"]] if "reason" in point else _problems(text, point, source)
        result.append({**point, "valid": not problems, "reason": "; ".join(problems)})
    return result


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "specserve_profile_edit": profile_edit,
            "specserve_tune_points": tune_points,
            "specserve_bucket": concurrency_bucket,
        }
