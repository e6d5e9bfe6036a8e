"""Shared helpers for the profile tests: build profile documents and run the CLI in-process."""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

from specserve.cli import main as specserve_main

REPO = Path(__file__).resolve().parents[2]
PROFILES = REPO / "profiles"
FIXTURES = REPO / "tests" / "fixtures" / "models"
KIMI = PROFILES / "kimi-k2.5-int4-eagle3-8gpu.yaml"
SHIPPED = sorted(PROFILES.glob("*.yaml"))


def kimi_doc() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(KIMI.read_text()))


def write_doc(tmp: Path, doc: dict[str, Any], name: str = "profile.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_model(tmp: Path, name: str, config: dict[str, Any]) -> Path:
    directory = tmp / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = specserve_main(list(args))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def check_json(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run_cli("check", str(path), "--format", "json", *extra)
    return code, json.loads(out)
