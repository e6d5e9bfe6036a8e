"""Read a profile file: YAML, then schema check, then a typed Profile (or ProfileError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specserve.profile.bounded import (
    MAX_PROFILE_BYTES,
    InputError,
    check_structure,
    decode_utf8,
    load_yaml,
    read_capped,
)
from specserve.profile.issues import Issue, error
from specserve.profile.model import Profile, profile_from_document
from specserve.profile.schema import schema_issues


class ProfileError(Exception):
    """The profile cannot be used; `issues` names each field, problem and fix. `usage` marks
    a path that is not a profile file at all (missing, a directory, a FIFO): exit 2, not 1."""

    def __init__(self, path: Path | str, issues: list[Issue], *, usage: bool = False) -> None:
        self.path = Path(path)
        self.issues = issues
        self.usage = usage
        lines = "\n".join("  " + i.render() for i in issues)
        super().__init__(f"profile {path} is invalid:\n{lines}")


def read_document(path: Path | str) -> Any:
    """The profile's YAML as Python objects, within the limits of specserve.profile.bounded
    (size, nodes after alias expansion, depth, items), or ProfileError saying which was hit."""
    path = Path(path)
    try:
        text = decode_utf8(read_capped(path, MAX_PROFILE_BYTES), path)
        check_structure(text)
        return load_yaml(text)
    except InputError as exc:
        problem = exc.problem if exc.problem.startswith(str(path)) else f"{path}: {exc.problem}"
        issue = error("(file)", problem, exc.fix)
        raise ProfileError(path, [issue], usage=exc.usage) from None


def load_profile(path: Path | str) -> Profile:
    """Load and schema-check `path`; raise ProfileError with every schema problem found."""
    path = Path(path)
    doc = read_document(path)
    issues = schema_issues(doc)
    if issues:
        raise ProfileError(path, issues)
    try:
        source = path.resolve()
    except (OSError, RuntimeError):  # a loop in a parent directory's links: keep it relative
        source = path.absolute()
    return profile_from_document(doc, source_path=source)
