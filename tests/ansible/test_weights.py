"""The weights role end to end on this machine: stage from a host path, over rsync and from a
Hugging Face Hub stand-in on 127.0.0.1 (the real `hf` client, installed by the role from PyPI);
verify, no re-transfer, and refuse an incomplete model or a refused token, losing nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import Deployment
from .harness import BIN, FIXTURES, VAULT_PASSWORD, playbook
from .hf_standin import COMMIT, serve
from .test_plugins import _model

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _vars(tmp_path: Path, source: Path | str, kind: str = "local", **more: object) -> Path:
    extra = tmp_path / "weights.yml"
    extra.write_text(yaml.safe_dump({
        "weights_root": str(tmp_path / "models"),
        "weights_log_dir": str(tmp_path / "log"),
        "weights_progress_poll_s": 0.5,
        "weights_models": [{"name": "tiny", "source": kind, "src": str(source),
                            "size_gib": 0.001}],
        **more,
    }))
    return extra


# rsync's --info=progress2 line: bytes, percent, rate, elapsed, then the transfer counts.
_PROGRESS2 = re.compile(r"\d[\d,]* +100% +\S+/s +\d+:\d\d:\d\d \(xfr#\d+, to-chk=0/\d+\)")


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


def _same_files(staged: Path, source: Path) -> None:
    for path in source.iterdir():
        assert (staged / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.parametrize("kind", ["local", "rsync"])
def test_rsync_transfer_and_resume_nothing(deployment: Deployment, tmp_path: Path,
                                           kind: str) -> None:
    assert shutil.which("rsync"), "rsync is needed (scripts/setup/system-packages.sh installs it)"
    source = _model(tmp_path / "src", shards=2)
    extra = _vars(tmp_path, source, kind)
    first = playbook(deployment.inventory, "--tags", "weights", "-e", f"@{extra}")
    assert first.rc == 0, first.output[-4000:]
    assert f"staging tiny from {kind}" in first.output and "2 files" in first.output
    log = (tmp_path / "log" / "weights-tiny.log").read_text()
    assert _PROGRESS2.search(log.replace("\r", "\n")), log  # rsync ran, not cp
    staged = tmp_path / "models" / "tiny"
    _same_files(staged, source)
    assert (staged / ".specserve-complete").read_text().strip() == f"{kind} {source}"
    again = playbook(deployment.inventory, "--tags", "weights", "-e", f"@{extra}")
    assert again.rc == 0 and again.recap()["changed"] == 0, again.output[-4000:]
    assert "staging tiny" not in again.output


HF_REPO = "specserve-test/tiny-eagle3"


@pytest.fixture(scope="module")
def hf_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One client venv for the module (the role installs it from PyPI on first use). The `hf`
    CLI checks PyPI for a newer release once a day; marking that done keeps the test on loopback."""
    venv = tmp_path_factory.mktemp("hf") / "venv"
    (venv / "home").mkdir(parents=True)
    (venv / "home" / ".check_for_update_done").touch()
    return venv


def _hf_token() -> str:
    """The test token from its own Vault file (a `.vault` name: yamllint's ignore list, which
    this change does not touch, names only fixtures/vault.yml)."""
    plain = subprocess.run(
        [str(BIN / "ansible-vault"), "view",
         "--vault-password-file", str(VAULT_PASSWORD), str(FIXTURES / "vault-hf.vault")],
        capture_output=True, text=True, check=True).stdout
    return str(yaml.safe_load(plain)["weights_hf_token"])


def test_huggingface_download_through_hub_standin(deployment: Deployment, tmp_path: Path,
                                                  hf_venv: Path) -> None:
    token = _hf_token()
    source = _model(tmp_path / "repo", shards=2)
    with serve(HF_REPO, source, token) as hub:
        extra = _vars(tmp_path, HF_REPO, "huggingface", weights_hf_endpoint=hub.url,
                      weights_hf_venv=str(hf_venv))
        run = playbook(deployment.inventory, "--tags", "weights", "-e", f"@{extra}",
                       "-e", f"@{FIXTURES / 'vault-hf.vault'}", timeout=600)
        assert run.rc == 0, run.output[-4000:]
        requested = list(hub.requests)
    assert "staging tiny from huggingface" in run.output and "2 files" in run.output
    assert token not in run.output
    staged = tmp_path / "models" / "tiny"
    _same_files(staged, source)
    assert (staged / ".specserve-complete").read_text().strip() == f"huggingface {HF_REPO}"
    gets = {path for method, path, status in requested if method == "GET" and status == 200}
    assert f"/api/models/{HF_REPO}/revision/main" in gets
    for name in ("config.json", "model.safetensors.index.json",
                 "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        assert f"/{HF_REPO}/resolve/{COMMIT}/{name}" in gets, requested


def test_huggingface_refused_token_loses_nothing(deployment: Deployment, tmp_path: Path,
                                                 hf_venv: Path) -> None:
    token = _hf_token()
    source = _model(tmp_path / "repo", shards=2)
    staged = tmp_path / "models" / "tiny"
    # A previous model in place (no marker for this source): `hf download` alone would return it.
    staged.parent.mkdir()
    previous = _model(staged, shards=1)
    before = {p.name: p.read_bytes() for p in previous.iterdir()}
    with serve(HF_REPO, source, token) as hub:
        extra = _vars(tmp_path, HF_REPO, "huggingface", weights_hf_endpoint=hub.url,
                      weights_hf_venv=str(hf_venv), weights_hf_token="hf_wrong_5b2d")
        run = playbook(deployment.inventory, "--tags", "weights", "-e", f"@{extra}",
                       timeout=600)
        requested = list(hub.requests)
    assert run.rc != 0
    assert "Staging tiny from huggingface" in run.output and "exit 1" in run.output
    assert "401 Unauthorized" in run.output, run.output[-4000:]
    assert "Invalid credentials in Authorization header" in run.output
    assert "hf_wrong_5b2d" not in run.output and token not in run.output
    assert not (staged / ".specserve-complete").exists()
    assert {p.name: p.read_bytes() for p in staged.iterdir()} == before
    assert requested and all(status == 401 for _, _, status in requested), requested
