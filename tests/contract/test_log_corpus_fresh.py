"""The committed log corpora are what SGLang's own code prints today, byte for byte.

Regenerates tests/fixtures/sglang-logs/<version>/ with scripts/sglang/log_corpus.py inside each
verified version's SGLang venv (the versions run side by side: each is mostly SGLang's import)
and compares. A difference means SGLang's formatting or the generator changed: regenerate with
`scripts/sglang/regenerate <version>` and let tests/exporter/test_sglang_corpus.py judge the
exporter against the new lines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from specserve.upstream import VERIFIED_VERSIONS

from .sglang_venv import ROOT, SCRIPTS, TIMEOUT_S, venv_python

FIXTURES = ROOT / "tests" / "fixtures" / "sglang-logs"
FILES = ("corpus.log", "expected.jsonl")


def _env() -> dict[str, str]:
    # SGLANG_* variables change what SGLang prints; the generator sets the ones it needs.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "SPECSERVE_"))}
    env["PYTHONWARNINGS"] = "ignore"
    return env


def test_committed_corpora_are_what_sglang_prints(tmp_path: Path) -> None:
    versions = list(VERIFIED_VERSIONS)
    running: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    for version in versions:
        python = venv_python(version)  # fails, naming bash scripts/setup/sglang.sh, if missing
        out = tmp_path / version
        proc = subprocess.Popen(
            [str(python), str(SCRIPTS / "log_corpus.py"), "--version", version, "--out", str(out)],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running[version] = (proc, out)
    for version, (proc, out) in running.items():
        try:
            _, stderr = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"log_corpus.py for SGLang {version} ran over {TIMEOUT_S} s")
        if proc.returncode != 0:
            pytest.fail(
                f"log_corpus.py for SGLang {version} exited {proc.returncode}:\n{stderr[-4000:]}",
                pytrace=False,
            )
        for name in FILES:
            committed = FIXTURES / version / name
            assert committed.is_file(), (
                f"{committed} is not committed: run scripts/sglang/regenerate {version}"
            )
            fresh = (out / name).read_bytes()
            if fresh != committed.read_bytes():
                old = committed.read_bytes().splitlines()
                new = fresh.splitlines()
                first = next(
                    (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
                    min(len(old), len(new)),
                )
                pytest.fail(
                    f"SGLang {version} prints a different {name} than the committed one "
                    f"(first difference at line {first + 1}):\n"
                    f"  committed: {old[first] if first < len(old) else b'<end>'!r}\n"
                    f"  SGLang:    {new[first] if first < len(new) else b'<end>'!r}\n"
                    f"regenerate with scripts/sglang/regenerate {version}",
                    pytrace=False,
                )
