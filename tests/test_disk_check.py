"""scripts/setup/disk.sh: the setup stops early, with figures, when the disk cannot hold the rest
of the setup and the run (CI once filled its disk and failed hundreds of tests at random)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_check(
    tmp_path: Path, free_mb: int, *, images: bool, venvs: bool
) -> subprocess.CompletedProcess[str]:
    repo = tmp_path / "repo"
    (repo / "scripts/setup").mkdir(parents=True)
    shutil.copy(ROOT / "scripts/setup/disk.sh", repo / "scripts/setup/disk.sh")
    shutil.copy(ROOT / "versions.yaml", repo / "versions.yaml")
    (repo / ".venv/bin").mkdir(parents=True)
    os.symlink(ROOT / ".venv/bin/python", repo / ".venv/bin/python")
    if venvs:
        (repo / ".sglang/_deps-0123456789ab").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A Docker client that has every image or none, and a df that reports the given free space.
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        f'[ "$1" = info ] && {{ echo {tmp_path}/docker-root; exit 0; }}\n'
        f"exit {0 if images else 1}\n"
    )
    (bin_dir / "df").write_text(
        "#!/bin/sh\n"
        "echo 'Filesystem 1048576-blocks Used Available Capacity Mounted on'\n"
        f"echo '/dev/x 100000 1 {free_mb} 1% /'\n"
    )
    for tool in ("docker", "df"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("SPECSERVE_DISK_CHECK", None)
    return subprocess.run(
        ["bash", str(repo / "scripts/setup/disk.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_fresh_machine_without_room_stops_with_the_figures_and_the_fix(tmp_path: Path) -> None:
    result = run_check(tmp_path, free_mb=15000, images=False, venvs=False)
    assert result.returncode == 1, result
    assert "15000 MB free" in result.stderr
    # Every part still to be written is counted and named.
    assert "about 20736 MB needed" in result.stderr, result.stderr
    for part in ("SGLang venvs", "SGLang local base", "router images", "test scratch"):
        assert part in result.stderr
    assert "docker system prune" in result.stderr and "SPECSERVE_DISK_CHECK=0" in result.stderr


def test_what_is_already_there_is_not_counted_again(tmp_path: Path) -> None:
    result = run_check(tmp_path, free_mb=3000, images=True, venvs=True)
    assert result.returncode == 0, result.stderr
    assert (
        "3000 MB free" in result.stdout
        and "need about 1536 MB (test scratch 1.5 GB)" in result.stdout
    )


def test_a_fresh_machine_with_room_goes_on(tmp_path: Path) -> None:
    result = run_check(tmp_path, free_mb=40000, images=False, venvs=False)
    assert result.returncode == 0, result.stderr
    assert "need about 20736 MB" in result.stdout
