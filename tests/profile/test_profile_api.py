"""The Python API other parts of the project use, the schema, and CLI exit codes."""

from __future__ import annotations

import json

import pytest
from helpers import KIMI, REPO, kimi_doc, run_cli, write_doc

from specserve.buckets import BUCKET_LABELS
from specserve.profile.facts import facts
from specserve.profile.loader import ProfileError, load_profile
from specserve.profile.model import Profile
from specserve.profile.schema import profile_schema


def test_exporter_api_on_default_profile():
    profile = load_profile(KIMI)
    assert isinstance(profile, Profile)
    assert facts(profile).draft_tokens == 4
    assert profile.baseline == {"1": 90.0}


def test_speculation_off_has_no_draft_tokens(tmp_path):
    doc = kimi_doc()
    doc["drafter"] = {"algorithm": "none"}
    assert facts(load_profile(write_doc(tmp_path, doc))).draft_tokens is None
    del doc["drafter"]
    assert facts(load_profile(write_doc(tmp_path, doc))).draft_tokens is None


def test_standin_paths_resolve_against_the_profile_dir():
    profile = load_profile(REPO / "profiles/standin-cpu.yaml")
    assert profile.target.path == str(REPO / "tests/fixtures/models/Llama-3.1-8B-Instruct")
    assert profile.server.launch_command == ("specserve-standin",)


def test_load_profile_raises_with_every_schema_issue(tmp_path):
    doc = kimi_doc()
    doc["server"]["port"] = 70000
    doc["parallelism"]["tp"] = 0
    with pytest.raises(ProfileError) as info:
        load_profile(write_doc(tmp_path, doc))
    fields = {i.field for i in info.value.issues}
    assert fields == {"server.port", "parallelism.tp"}


def test_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\ntarget: [unclosed\n")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert "line" in info.value.issues[0].problem


def test_schema_buckets_match_buckets_module():
    names = profile_schema()["properties"]["baseline"]["properties"]["gen_throughput_tok_s"]
    assert names["propertyNames"]["enum"] == list(BUCKET_LABELS[1:])


def test_profile_schema_command_prints_the_published_schema():
    code, out, _ = run_cli("profile-schema")
    assert code == 0
    assert json.loads(out) == json.loads((REPO / "specserve/profile/schema.json").read_text())


def test_exit_codes(tmp_path):
    assert run_cli("check", str(KIMI), "--configs-only")[0] == 0
    assert run_cli("check", str(tmp_path / "missing.yaml"))[0] == 2
    assert run_cli("check", str(KIMI), "--format", "xml")[0] == 2
    doc = kimi_doc()
    doc["drafter"]["num_draft_tokens"] = 8
    code, out, _ = run_cli("check", str(write_doc(tmp_path, doc)))
    assert code == 1
    assert "error: drafter.num_draft_tokens:" in out and "Fix: set num_draft_tokens: 4" in out
