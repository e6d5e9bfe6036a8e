"""Read a profile file: YAML, then schema check, then a typed Profile (or ProfileError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from specserve.profile.issues import Issue, error
from specserve.profile.model import Profile, profile_from_document
from specserve.profile.schema import schema_issues


class ProfileError(Exception):
    """The profile cannot be used; `issues` names each field, problem and fix."""

    def __init__(self, path: Path | str, issues: list[Issue]) -> None:
        self.path = Path(path)
        self.issues = issues
        lines = "\n".join("  " + i.render() for i in issues)
        super().__init__(f"profile {path} is invalid:\n{lines}")


def read_document(path: Path | str) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(
            path, [error("(file)", f"cannot read {path}: {exc.strerror}", "check the path")]
        ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ProfileError(
            path, [error("(file)", f"not valid YAML{where}: {exc}", "fix the YAML syntax")]
        ) from exc


def load_profile(path: Path | str) -> Profile:
    """Load and schema-check `path`; raise ProfileError with every schema problem found."""
    path = Path(path)
    doc = read_document(path)
    issues = schema_issues(doc)
    if issues:
        raise ProfileError(path, issues)
    return profile_from_document(doc, source_path=path.resolve())
