"""Print check results: text for people, JSON for tools; errors and warnings kept apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from specserve.profile.issues import Issue, errors, warnings


def format_text(path: Path | str, issues: list[Issue]) -> str:
    errs, warns = errors(issues), warnings(issues)
    lines = [f"profile: {path}"]
    lines += [i.render() for i in errs]
    lines += [i.render() for i in warns]
    verdict = "FAILED" if errs else "OK"
    lines.append(f"{verdict}: {len(errs)} error(s), {len(warns)} warning(s)")
    return "\n".join(lines) + "\n"


def format_json(path: Path | str, issues: list[Issue]) -> str:
    errs, warns = errors(issues), warnings(issues)
    doc = {
        "profile": str(path),
        "ok": not errs,
        "errors": [i.as_dict() for i in errs],
        "warnings": [i.as_dict() for i in warns],
    }
    return json.dumps(doc, indent=2) + "\n"


def write_report(out: TextIO, path: Path | str, issues: list[Issue], fmt: str) -> None:
    out.write(format_json(path, issues) if fmt == "json" else format_text(path, issues))
