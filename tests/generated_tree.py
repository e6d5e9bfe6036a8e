"""A scratch copy of what `specserve generate` reads and writes, for tests that change a source
and regenerate without touching the checkout."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("charts", "profiles", "monitoring", "docs", "ansible", "docker", "playbooks")
FILES = ("versions.yaml", "pyproject.toml", "specserve/profile/schema.json", "specserve/logpath.py")


def copy(dest: Path) -> Path:
    """`dest`, holding a copy of every generator's inputs and outputs."""
    skip = shutil.ignore_patterns("__pycache__", ".pytest_cache")
    for folder in FOLDERS:
        shutil.copytree(REPO / folder, dest / folder, ignore=skip)
    for name in FILES:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, dest / name)
    return dest
