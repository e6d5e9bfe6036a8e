"""Profile edits for the baseline and tuning runs.

Ansible never renders the SGLang command line: a baseline or a candidate is the deployment
profile with its speculative parameters (or baseline block) changed, and the launcher renders
it as for any other profile. The edit keeps the file's comments and key order (ruamel.yaml round
trip) because the result is written back into the user's profile.
"""

from __future__ import annotations

import io
import json
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from specserve.profile.algorithms import document_speculates
from specserve.profile.likeness import SETTINGS as BASELINE_SETTINGS
from specserve.profile.variants import speculative_max_running_requests
from specserve.tune.errors import TuneError

# The tree a grid point sets.
TREE = ("num_steps", "eagle_topk", "num_draft_tokens")

MEASURED_COMMENT = (
    "Measured by `specserve bench` (playbooks/baseline.yml), with the settings it was measured\n"
    "with recorded below; `check` compares them with this profile (docs/tuning.md)."
)
NO_DRAFTER = "the profile has no drafter to tune: set drafter (algorithm, path) first"


def _yaml() -> YAML:
    yaml = YAML()  # round trip: comments, order and quoting survive
    yaml.preserve_quotes = True
    yaml.width = 100
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def load_document(text: str) -> Any:
    """The profile as a round-trip document (a mapping that remembers its comments)."""
    doc = _yaml().load(text)
    if not isinstance(doc, dict):
        raise TuneError("the profile is not a YAML mapping")
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
    doc = load_document(text)
    if isinstance(speculative, dict) and speculative.get("speculative") is False:
        speculative = "off"
    if speculative == "off":
        _speculation_off(doc)
    elif isinstance(speculative, dict) and isinstance(speculative.get("drafter"), dict):
        _other_method(doc, speculative)
    elif isinstance(speculative, dict):
        _retune(doc, speculative)
    elif speculative is not None:
        raise TuneError(f"speculative must be 'off' or a mapping, not {speculative!r}")
    if drop_baseline:
        doc.pop("baseline", None)
        _drop_comments(doc, "baseline")
    if baseline is not None:
        _record_baseline(doc, baseline)
    return _dump(doc)


def _speculation_off(doc: Any) -> None:
    # Like for like: the baseline runs with the running-request cap the speculative server
    # has (its own value, else the 48 SGLang applies under speculation), not uncapped.
    cap = speculative_max_running_requests(doc)
    doc.pop("drafter", None)
    _pin_running(doc, cap)


def _other_method(doc: Any, point: dict[str, Any]) -> None:
    """Another method (tune_methods): its drafter block whole, nothing of the profile's tree."""
    if not document_speculates(doc):
        raise TuneError(NO_DRAFTER)
    # Plain types: Ansible's tagged strings are not something ruamel.yaml can write.
    doc["drafter"] = CommentedMap(json.loads(json.dumps(point["drafter"])))
    _drop_comments(doc, "drafter")
    _pin_running(doc, point.get("max_running_requests"))


def _retune(doc: Any, point: dict[str, Any]) -> None:
    if not document_speculates(doc):
        raise TuneError(NO_DRAFTER)
    for key in TREE:
        if key in point:
            doc["drafter"][key] = int(point[key])
    if "adaptive" in point:
        doc["drafter"]["adaptive"] = bool(point["adaptive"])
    preset = point.get("nccl_preset")
    if preset:
        doc.setdefault("nccl", {})["preset"] = str(preset)
    _pin_running(doc, point.get("max_running_requests"))


def _record_baseline(doc: Any, baseline: dict[str, Any]) -> None:
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
