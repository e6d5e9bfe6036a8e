"""specserve.profile.facts: each derived fact, decided once, for the shipped profiles and edits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.profile.algorithms import (
    NO_SPECULATION,
    SPECULATIVE_ALGORITHMS,
    document_speculates,
    speculates,
)
from specserve.profile.endpoints import probe_host
from specserve.profile.facts import ProfileFacts, facts, load_facts
from specserve.profile.model import gpus_needed, profile_from_document
from specserve.profile.schema import profile_schema, schema_issues

REPO = Path(__file__).resolve().parents[2]
KIMI = REPO / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
STANDIN = REPO / "profiles" / "standin-cpu.yaml"


def _doc(path: Path = STANDIN, **changes: Any) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    assert not schema_issues(doc), schema_issues(doc)
    return doc


def _facts(doc: dict[str, Any]) -> ProfileFacts:
    return facts(profile_from_document(doc), doc)


@pytest.mark.parametrize(
    ("algorithm", "on"),
    [("EAGLE3", True), ("eagle3", True), ("NGRAM", True), ("none", False), (None, False)],
)
def test_speculates(algorithm: str | None, on: bool) -> None:
    assert speculates(algorithm) is on
    doc = {"drafter": {"algorithm": algorithm}} if algorithm else {}
    assert document_speculates(doc) is on


def test_speculation_off_clears_algorithm_and_draft_tokens() -> None:
    off = _facts(_doc(drafter__algorithm=NO_SPECULATION))
    assert (off.speculating, off.algorithm, off.draft_tokens) == (False, None, None)
    assert off.as_ansible_dict()["speculative"] is False
    assert off.as_ansible_dict()["draft_tokens"] == 0 and off.as_ansible_dict()["algorithm"] == ""
    no_drafter = _facts(_doc(drafter=None))
    assert not no_drafter.speculating and no_drafter.drafter_path is None
    on = _facts(_doc(drafter__algorithm="eagle3"))
    assert (on.speculating, on.algorithm, on.draft_tokens) == (True, "EAGLE3", 4)


@pytest.mark.parametrize(
    ("tp", "dp", "attention", "needed"), [(8, 1, False, 8), (4, 2, False, 8), (8, 2, True, 8)]
)
def test_gpus_needed(tp: int, dp: int, attention: bool, needed: int) -> None:
    assert gpus_needed(tp, dp, attention) == needed
    doc = _doc(KIMI, parallelism={"tp": tp, "dp": dp, "enable_dp_attention": attention})
    assert _facts(doc).gpus_needed == needed
    assert profile_from_document(doc).parallelism.gpus_needed == needed  # the model delegates


@pytest.mark.parametrize(
    ("host", "url"),
    [("0.0.0.0", "http://127.0.0.1:30000"), ("::", "http://127.0.0.1:30000"),
     ("10.1.2.3", "http://10.1.2.3:30000"), ("::1", "http://[::1]:30000")],
)
def test_wildcard_bind_is_probed_on_loopback(host: str, url: str) -> None:
    f = _facts(_doc(server__host=host))
    assert f.probe_host == probe_host(host) and f.server_url == url
    assert f.health_url == url + "/health_generate" and f.ready_url == url + "/ready"


def test_metrics_url_only_with_metrics_on() -> None:
    assert _facts(_doc()).metrics_url == "http://127.0.0.1:30000/metrics"
    off = _facts(_doc(server__enable_metrics=False))
    assert off.metrics_url is None and off.as_ansible_dict()["metrics_url"] == ""


def test_defaults_are_filled_in() -> None:
    f = _facts(_doc(server__port=None, logging__max_bytes=None, logging__backup_count=None))
    schema = profile_schema()["properties"]
    logging = schema["logging"]["properties"]
    assert f.server_port == schema["server"]["properties"]["port"]["default"]
    expected = logging["max_bytes"]["default"] * (logging["backup_count"]["default"] + 1)
    assert f.log_budget_bytes == expected


def test_paths_as_written_and_loaded_from_file() -> None:
    f = load_facts(STANDIN)
    assert f.target_path == "../tests/fixtures/models/Llama-3.1-8B-Instruct"
    assert f.log_file and f.log_dir == str(Path(f.log_file).parent)
    kimi = load_facts(KIMI)
    assert (kimi.gpu_count, kimi.server_port, kimi.draft_tokens) == (8, 8000, 4)
    assert kimi.api_key_file == "/run/secrets/specserve/api-key" and kimi.baseline_text == "1=90"


def test_algorithm_list_is_the_schemas() -> None:
    enum = profile_schema()["properties"]["drafter"]["properties"]["algorithm"]["enum"]
    assert {a for a in enum if a != NO_SPECULATION} == {
        *SPECULATIVE_ALGORITHMS, *(a.lower() for a in SPECULATIVE_ALGORITHMS)
    }


def test_the_effective_running_request_cap_is_a_fact_from_sglangs_resolution(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile's own cap, else the one SGLang's speculative handler sets (read from its code
    per version), else none; the contract's number moved once moves the fact."""
    from specserve.profile import sglang, variants

    assert facts(profile_from_document(_doc(server__max_running_requests=12))) \
        .max_running_requests == 12
    speculative = profile_from_document(_doc(server__max_running_requests=None))
    assert speculative.speculative is not None
    contract = sglang.sglang_contract()
    eagle_cap = contract.facts["max_running_requests_cap"]["by_handler"]["_handle_eagle_family"]
    assert facts(speculative).max_running_requests == eagle_cap == 48
    assert facts(speculative).as_ansible_dict()["max_running_requests"] == 48
    without = _doc(server__max_running_requests=None)
    without["drafter"] = None
    assert facts(profile_from_document(without)).max_running_requests is None
    assert facts(profile_from_document(without)).as_ansible_dict()["max_running_requests"] == 0

    moved = {**contract.facts["max_running_requests_cap"]["by_handler"],
             "_handle_eagle_family": 32}
    monkeypatch.setitem(contract.facts, "max_running_requests_cap",
                        {**contract.facts["max_running_requests_cap"], "by_handler": moved})
    monkeypatch.setattr(variants, "sglang_contract", lambda _version=None: contract)
    assert facts(speculative).max_running_requests == 32
