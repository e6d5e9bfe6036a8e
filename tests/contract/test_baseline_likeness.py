"""The like-for-like comparison's running-request cap is SGLang's own (issue 18 item 2).

`specserve.profile.likeness` judges a speculative profile against its baseline with the
effective `max_running_requests`: the profile's, else the cap SGLang applies under speculation
when it is unset. Here every drafter profile, with the cap written and left unset, goes through
SGLang's real resolution (test_resolved_argv's cases, one subprocess per version): the value the
comparison uses is the one SGLang resolves for the speculative argv, the baseline variant
baseline.yml deploys resolves to the same value, and the settings recorded from that variant
compare like for like with the speculative profile.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specserve.profile.likeness import compare, effective_max_running_requests, profile_settings
from specserve.profile.model import profile_from_document
from specserve.tune.edit import profile_edit
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import _has_drafter, _profiles
from tests.contract.test_resolved_argv import _variant_doc, result_of

DRAFTER_PROFILES = list(filter(_has_drafter, _profiles()))
CASES = [(p, kind, v) for v in VERIFIED_VERSIONS for p in DRAFTER_PROFILES
         for kind in ("profile", "unset-cap")]  # fmt: skip


def _doc(path: Path, kind: str) -> dict:
    if kind == "profile":
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    return _variant_doc(path, "cap")


@pytest.mark.parametrize(("path", "kind", "version"), CASES,
                         ids=[f"{k}:{p.name}@{v}" for p, k, v in CASES])  # fmt: skip
def test_the_compared_cap_is_the_one_sglang_resolves(path: Path, kind: str, version: str) -> None:
    doc = _doc(path, kind)
    speculative = profile_from_document(doc)
    resolved = result_of(f"{kind}:{path.name}", version)["resolved"]["max_running_requests"]
    assert effective_max_running_requests(speculative, version) == resolved
    # The baseline variant (no drafter, cap pinned) resolves to the same cap in SGLang.
    off = yaml.safe_load(profile_edit(yaml.safe_dump(doc, sort_keys=False), "off"))
    base_name = f"baseline:{path.name}" if kind == "profile" else f"baseline-{kind}:{path.name}"
    base_resolved = result_of(base_name, version)["resolved"]["max_running_requests"]
    assert base_resolved == resolved
    # What baseline.yml records from that variant is like for like with the speculative profile.
    recorded = profile_settings(profile_from_document(off), "img:1", version)
    assert recorded["max_running_requests"] == base_resolved
    doc["baseline"] = {"gen_throughput_tok_s": {"1": 90.0}, **recorded}
    comparison = compare(profile_from_document(doc), "img:1", version)
    assert comparison.applies and comparison.like_for_like, comparison
    assert not comparison.unrecorded
    # Without the pin (the bare profile minus its drafter) there is no cap: unlike.
    bare = {k: v for k, v in doc.items() if k != "drafter"}
    bare["server"] = {k: v for k, v in doc["server"].items() if k != "max_running_requests"}
    doc["baseline"]["max_running_requests"] = effective_max_running_requests(
        profile_from_document(bare), version)
    assert doc["baseline"]["max_running_requests"] is None
    assert not compare(profile_from_document(doc), "img:1", version).like_for_like
