"""The weights role end to end on this machine: stage from a host path, verify, no re-transfer,
and refuse an incomplete model naming the missing shard."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import Deployment
from .harness import playbook
from .test_plugins import _model

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _vars(tmp_path: Path, source: Path) -> Path:
    extra = tmp_path / "weights.yml"
    extra.write_text(yaml.safe_dump({
        "weights_root": str(tmp_path / "models"),
        "weights_log_dir": str(tmp_path / "log"),
        "weights_progress_poll_s": 0.5,
        "weights_models": [{"name": "tiny", "source": "local", "src": str(source),
                            "size_gib": 0.001}],
    }))
    return extra


def test_stage_verify_and_skip(deployment: Deployment, tmp_path: Path) -> None:
    source = _model(tmp_path / "src", shards=3)
    extra = _vars(tmp_path, source)
    first = playbook(deployment.inventory, "--tags", "preflight,weights", "-e", f"@{extra}")
    assert first.rc == 0, first.output[-4000:]
    assert "staging tiny from local" in first.output and "exit 0 (done)" in first.output
    assert "3 files" in first.output
    staged = tmp_path / "models" / "tiny"
    assert sorted(p.name for p in staged.glob("*.safetensors")) == sorted(
        p.name for p in source.glob("*.safetensors"))
    assert (staged / ".specserve-complete").read_text().strip() == f"local {source}"
    again = playbook(deployment.inventory, "--tags", "preflight,weights", "-e", f"@{extra}")
    assert again.rc == 0 and again.recap()["changed"] == 0, again.output[-4000:]
    assert "staging tiny" not in again.output


def test_incomplete_model_is_refused(deployment: Deployment, tmp_path: Path) -> None:
    source = _model(tmp_path / "src", shards=2)
    (source / "model-00002-of-00002.safetensors").unlink()
    run = playbook(deployment.inventory, "--tags", "preflight,weights",
                   "-e", f"@{_vars(tmp_path, source)}")
    assert run.rc != 0
    assert "is incomplete" in run.output
    assert "1 of 2 shards missing: model-00002-of-00002.safetensors" in run.output
    assert not (tmp_path / "models" / "tiny" / ".specserve-complete").exists()
    shutil.rmtree(tmp_path / "models")
