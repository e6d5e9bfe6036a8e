"""scripts/setup/sglang.sh fails loudly, naming the version, when SGLang cannot be installed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "setup" / "sglang.sh"
BOGUS = "0.0.0+not.a.release"


def fake_deps(venvs: Path) -> None:
    # A _deps "venv" whose marker matches versions.yaml, so the run goes straight to installing
    # sglang itself (installing the real shared packages would take a minute). The marker is
    # what the script writes: the packages as `LC_ALL=C sort -f` orders them, then the Python;
    # the directory is named by the first 12 hex digits of that text's SHA-256. Its python is
    # a venv of this interpreter, whose pip installs into the version's venv (`pip --python`).
    packages = yaml.safe_load((ROOT / "versions.yaml").read_text())["sglang"]["venv_packages"]
    lines = [*sorted(packages, key=str.upper), f"python {sys.version.split()[0]}"]
    text = "\n".join(lines)
    deps = venvs / f"_deps-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    subprocess.run([sys.executable, "-m", "venv", str(deps)], check=True, timeout=120)
    (deps / ".specserve-packages").write_text(text + "\n")


def _setup(venvs: Path, version: str, **env: str) -> subprocess.CompletedProcess[str]:
    fake_deps(venvs)
    full = {**os.environ, "SPECSERVE_SGLANG_VENVS": str(venvs), "PYTHON": sys.executable, **env}
    return subprocess.run(["bash", str(SCRIPT), version], capture_output=True, text=True,
                          env=full, timeout=120, check=False)  # fmt: skip


def test_a_version_without_its_declared_pins_exits_non_zero_naming_it(tmp_path: Path) -> None:
    proc = _setup(tmp_path, BOGUS)
    assert proc.returncode != 0, proc.stdout
    # It went past the shared packages (the fake marker matched) to SGLang itself.
    assert "installing the shared packages" not in proc.stdout, proc.stdout
    expected = f"sglang.sh: SGLang {BOGUS}: versions.yaml sglang.version_packages has no"
    assert expected in proc.stderr and "METADATA Requires-Dist" in proc.stderr, proc.stderr
    assert not (tmp_path / BOGUS).exists()


def test_an_uninstallable_version_exits_non_zero_naming_it(tmp_path: Path) -> None:
    # A verified version (it has its pins) from an index that has nothing: pip fails.
    version = yaml.safe_load((ROOT / "versions.yaml").read_text())["sglang"]["pinned"]
    proc = _setup(tmp_path, version, PIP_NO_INDEX="1")
    assert proc.returncode != 0, proc.stdout
    assert "installing the shared packages" not in proc.stdout, proc.stdout
    expected = f"sglang.sh: SGLang {version}: pip install --no-deps sglang=={version} "
    assert expected in proc.stderr, proc.stderr
    # Nothing half-built is left where the suite would look for the venv.
    assert not (tmp_path / version).exists()
