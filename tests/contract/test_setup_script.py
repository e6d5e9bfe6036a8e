"""scripts/setup/sglang.sh fails loudly, naming the version, when SGLang cannot be installed."""

from __future__ import annotations

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
    # what the script writes: the packages as `LC_ALL=C sort -f` orders them, then the Python.
    packages = yaml.safe_load((ROOT / "versions.yaml").read_text())["sglang"]["venv_packages"]
    deps = venvs / "_deps"
    (deps / "bin").mkdir(parents=True)
    (deps / "bin" / "python").symlink_to(sys.executable)
    lines = [*sorted(packages, key=str.upper), f"python {sys.version.split()[0]}"]
    (deps / ".specserve-packages").write_text("\n".join(lines) + "\n")


def test_an_uninstallable_version_exits_non_zero_naming_it(tmp_path: Path) -> None:
    fake_deps(tmp_path)
    env = {**os.environ, "SPECSERVE_SGLANG_VENVS": str(tmp_path), "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(SCRIPT), BOGUS],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0, proc.stdout
    # It went past the shared packages (the fake marker matched) to SGLang itself.
    assert "installing the shared packages" not in proc.stdout, proc.stdout
    expected = f"sglang.sh: SGLang {BOGUS}: pip install --no-deps sglang=={BOGUS} failed"
    assert expected in proc.stderr, proc.stderr
    # Nothing half-built is left where the suite would look for the venv.
    assert not (tmp_path / BOGUS).exists()
