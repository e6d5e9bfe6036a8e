"""drafter.adaptive / drafter.adaptive_config: SGLang's run-time step adaptation in the profile."""

from __future__ import annotations

from helpers import kimi_doc, write_doc

from specserve.profile import load_profile
from specserve.profile.render import render


def _argv(tmp_path, **drafter):
    doc = kimi_doc()
    doc["drafter"].update(drafter)
    return list(render(load_profile(write_doc(tmp_path, doc))).argv)


def test_adaptive_renders_the_switch_and_its_config_path(tmp_path):
    (tmp_path / "adaptive.json").write_text('{"1": {"candidate_steps": [1, 3]}}')
    argv = _argv(tmp_path, adaptive=True, adaptive_config="./adaptive.json")
    assert "--speculative-adaptive" in argv
    at = argv.index("--speculative-adaptive-config")
    # Relative to the profile's directory, like the model paths.
    assert argv[at + 1] == str(tmp_path / "adaptive.json")


def test_adaptive_off_renders_neither_flag(tmp_path):
    argv = _argv(tmp_path)
    assert not [a for a in argv if a.startswith("--speculative-adaptive")]


def test_adaptive_renders_nothing_without_speculation(tmp_path):
    argv = _argv(tmp_path, algorithm="none", adaptive=True)
    assert not [a for a in argv if a.startswith("--speculative")]


def test_the_model_carries_the_fields(tmp_path):
    doc = kimi_doc()
    doc["drafter"]["adaptive"] = True
    drafter = load_profile(write_doc(tmp_path, doc)).speculative
    assert drafter is not None and drafter.adaptive is True and drafter.adaptive_config is None
