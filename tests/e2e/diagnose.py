"""`specserve diagnose` run as an operator runs it, against an end-to-end stack's Prometheus."""

from __future__ import annotations

import re
import subprocess

from tests.e2e.stack import BINDIR, Stack


def diagnosed(stack: Stack, *extra: str) -> tuple[int, list[tuple[str, str]], str]:
    """`specserve diagnose` against this stack's Prometheus, as an operator runs it: its exit
    status, its findings in rank order as (role, alert or profile field), and its text."""
    done = subprocess.run(
        [str(BINDIR / "specserve"), "diagnose", "--prometheus", stack.prometheus.url,
         "--overrides", str(stack.overrides), *extra],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    text = done.stdout + done.stderr
    found = re.findall(r"^\d+\. \[(\w+)\] ([^:]+(?:: [a-z_.]+)?):", done.stdout, re.M)
    return done.returncode, [(role, name) for role, name in found], text


def first_beyond_blind(findings: list[tuple[str, str]]) -> tuple[str, str]:
    """The first finding once the ones about the log's reliability (a phase switch may leave
    SpecServeAcceptLengthMismatch holding for a few seconds) are set aside."""
    rest = [item for item in findings if item[0] != "blind"]
    assert rest, findings
    return rest[0]
