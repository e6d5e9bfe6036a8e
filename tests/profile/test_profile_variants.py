"""The baseline variant (playbooks/baseline.yml: the profile without its drafter) runs with the
same running-request cap as the speculative server it is compared with."""

from __future__ import annotations

import yaml
from helpers import KIMI

from specserve.profile.variants import speculative_max_running_requests
from specserve.tune.edit import profile_edit

TEXT = KIMI.read_text(encoding="utf-8")


def _baseline(text: str) -> dict:
    doc = yaml.safe_load(profile_edit(text, "off"))
    assert "drafter" not in doc
    return doc


def test_unset_cap_is_pinned_to_what_sglang_gives_the_speculative_run():
    text = TEXT.replace("  max_running_requests: 48\n", "")
    assert "max_running_requests" not in yaml.safe_load(text)["server"]
    # SGLang 0.5.21 / 0.5.23 set 48 under speculation when it is unset; the baseline must too.
    assert _baseline(text)["server"]["max_running_requests"] == 48


def test_explicit_cap_is_carried_over():
    text = TEXT.replace("max_running_requests: 48", "max_running_requests: 32")
    assert _baseline(text)["server"]["max_running_requests"] == 32


def test_no_cap_is_invented_without_speculation():
    doc = yaml.safe_load(TEXT)
    del doc["drafter"], doc["server"]["max_running_requests"]
    assert speculative_max_running_requests(doc) is None
    assert "max_running_requests" not in _baseline(yaml.safe_dump(doc))["server"]
    doc["drafter"] = {"algorithm": "none"}
    assert speculative_max_running_requests(doc) is None


def test_cap_per_algorithm_and_spelling():
    for algorithm in ("EAGLE3", "eagle", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "dspark"):
        doc = {"drafter": {"algorithm": algorithm}, "server": {}}
        assert speculative_max_running_requests(doc) == 48, algorithm
        assert speculative_max_running_requests(doc, "0.5.23") == 48, algorithm


def test_baseline_without_a_server_block_gets_one():
    doc = yaml.safe_load(TEXT)
    del doc["server"]
    assert _baseline(yaml.safe_dump(doc))["server"] == {"max_running_requests": 48}
