"""tuning.methods (the alternatives playbooks/tune.yml ranks): each block is held to the checks its
own profile would be, so a wrong alternative is refused where the profile is written, not found
invalid at tuning time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Severity
from specserve.profile.loader import load_profile

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "profiles" / "standin-cpu.yaml"
EAGLE3_HEAD = "../tests/fixtures/models/EAGLE3-LLaMA3.1-Instruct-8B"


def _errors(tmp_path: Path, methods: list[dict[str, Any]]) -> list[str]:
    doc = yaml.safe_load(STANDIN.read_text())
    doc["tuning"] = {"methods": methods}
    (tmp_path / "profiles").mkdir(exist_ok=True)
    if not (tmp_path / "tests").exists():
        (tmp_path / "tests").symlink_to(ROOT / "tests")  # the profile's relative model paths
    path = tmp_path / "profiles" / "tuned.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    issues = run_checks(load_profile(path), CheckOptions(configs_only=True))
    return [i.render() for i in issues if i.severity is Severity.ERROR]


def test_valid_alternatives_add_no_error(tmp_path: Path) -> None:
    assert _errors(tmp_path, [{"algorithm": "NGRAM"}, {"algorithm": "NGRAM",
                                                       "num_draft_tokens": 8}]) == []


def test_the_seeds_bug_in_an_alternative_is_refused_under_its_own_field(tmp_path: Path) -> None:
    errors = _errors(tmp_path, [{"algorithm": "NGRAM"},
                                {"algorithm": "EAGLE", "path": EAGLE3_HEAD}])  # fmt: skip
    assert len(errors) == 1, errors
    assert errors[0].startswith("error: tuning.methods[1] (EAGLE) drafter.algorithm: ")
    assert "only EAGLE3 makes SGLang capture the target's aux hidden states" in errors[0]


def test_a_block_drafter_without_its_drafter_is_refused(tmp_path: Path) -> None:
    errors = _errors(tmp_path, [{"algorithm": "DSPARK"}])
    assert any(e.startswith("error: tuning.methods[0] (DSPARK) drafter.path: ") for e in errors)
    # The profile's own drafter (EAGLE3 on its head) is as valid as without the alternatives.
    assert not any(e.startswith("error: drafter") for e in errors), errors
