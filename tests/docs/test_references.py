"""Every path of this repository that a tracked file names exists.

Docs, comments and messages point the next engineer at files ("see docs/alerts.md",
"tests/contract/test_uno.py resolves every case"); a renamed or removed file leaves them pointing
at nothing. A word is taken for a repository path when it starts with one of the top-level
directories and ends in a file suffix; it must name a tracked file, relative to the root or to
the file that names it (the chart's own `specserve/templates/...` relative to `charts/`). The few
that name something outside the repository on purpose are listed with why.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]

TOP = ("docs", "tests", "specserve", "ansible", "charts", "playbooks", "profiles", "scripts",
       "docker", "monitoring", "exporter", "benchmarks", ".ci")  # fmt: skip
SUFFIXES = ("md", "py", "yaml", "yml", "sh", "json", "j2", "tpl", "txt", "toml", "cfg")
PATH = re.compile(
    rf"(?<![\w/.-])((?:{'|'.join(re.escape(t) for t in TOP)})/[\w./-]*[\w-]\."
    rf"(?:{'|'.join(SUFFIXES)}))(?![\w/])"
)
# Named on purpose, though not here: path -> why.
ELSEWHERE = {
    "docs/autoregressive/Moonshotai/Kimi-K2.5.md": "SGLang's cookbook, the recipe a profile cites",
    "profiles/my-kimi-2x8gpu.yaml": "a user's own profile in an example command",
    "profiles/seeds.yaml": "a user's own profile in an example command",
}
# Data a tool wrote, not prose: SGLang's corpus, rendered manifests whose `# Source:` lines are
# the chart's own relative paths.
SKIPPED = ("tests/fixtures/sglang-logs/", "tests/helm/golden/", "tests/profile/golden/")


def _tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    return set(out.split())


def _named(tracked: set[str]) -> dict[str, set[str]]:
    """Path -> the files naming it, for every path-like word of every tracked text file."""
    named: dict[str, set[str]] = {}
    for name in sorted(tracked):
        if name.startswith(SKIPPED):
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for match in PATH.finditer(text):
            named.setdefault(match.group(1), set()).add(name)
    return named


def _resolves(path: str, where: str, tracked: set[str]) -> bool:
    relative = str(PurePosixPath(where).parent / path)
    return any(p in tracked for p in (path, relative, f"charts/{path}"))


def test_every_named_repository_path_exists() -> None:
    tracked = _tracked()
    named = _named(tracked)
    missing = sorted(
        f"{path} (named in {', '.join(sorted(where))})"
        for path, where in named.items()
        if path not in ELSEWHERE and not all(_resolves(path, w, tracked) for w in where)
    )
    assert not missing, "paths that name nothing:\n" + "\n".join(missing)


def test_the_check_sees_paths_and_would_see_a_broken_one() -> None:
    tracked = _tracked()
    named = _named(tracked)
    # It reads prose, comments and code alike...
    assert "docs/algorithms.md" in named and "README.md" in named["docs/algorithms.md"]
    assert len(named) > 200
    # ...and a path that is not there does not resolve.
    # (Spelled in two parts: as one word this file would name it.)
    assert not _resolves("docs/" + "no-such-page.md", "README.md", tracked)
    assert all(p not in tracked for p in ELSEWHERE), "an ELSEWHERE entry exists: drop it"
