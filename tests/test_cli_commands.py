"""docs/commands.md, the command matrix, stays true: each row with an exit code is run as printed
and gives that exit code and every quoted fragment; every `specserve check` / `render` line the
README, docs/profile.md and `scripts/demo` print is a row; every command has a row; the rows not
run here (they need a server, GPUs or Docker) are at least accepted by `specserve`'s parser."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from specserve import cli
from tests.profile.helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "docs" / "commands.md"
ROW = re.compile(r"^\| `(specserve [^`]*)` \| ([0-9]+|-) \| (.*) \|$", re.M)


def _rows() -> list[tuple[str, int | None, list[str]]]:
    rows = []
    for command, code, prints in ROW.findall(MATRIX.read_text(encoding="utf-8")):
        rows.append((command, None if code == "-" else int(code), re.findall(r"`([^`]+)`", prints)))
    return rows


ROWS = _rows()
RUN = [row for row in ROWS if row[1] is not None]
NOT_RUN = [row for row in ROWS if row[1] is None]


def test_the_matrix_has_rows():
    # The pattern above finding nothing would make every test below pass vacuously.
    assert len(RUN) >= 20 and len(NOT_RUN) >= 3, (len(RUN), len(NOT_RUN))
    assert all(prints for _, _, prints in RUN), "a run row quotes nothing to check"


@pytest.mark.parametrize(("command", "code", "prints"), RUN, ids=[r[0] for r in RUN])
def test_each_row_gives_its_documented_result(command, code, prints, monkeypatch):
    monkeypatch.chdir(ROOT)
    got, out, err = run_cli(*shlex.split(command)[1:])
    assert got == code, f"{command}: exit {got}, documented {code}\n{out}{err}"
    missing = [fragment for fragment in prints if fragment not in out + err]
    assert not missing, f"{command}: does not print {missing}\n{out}{err}"


@pytest.mark.parametrize("command", [r[0] for r in NOT_RUN])
def test_rows_not_run_are_valid_command_lines(command):
    argv = shlex.split(command)[1:]
    args = cli.build_parser(argv).parse_args(argv)
    assert callable(args.handler)


def _code_lines(text: str) -> list[str]:
    """The lines of fenced code blocks, continuation lines joined."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]


def _command(line: str) -> str | None:
    """`specserve ...` as a user types it: prompt, `.venv/bin/` and comment dropped."""
    match = re.match(r"^\s*(?:\$ )?(?:\.venv/bin/)?(specserve [^#]*)", line)
    return " ".join(match.group(1).split()) if match else None


def _demo_command(line: str) -> str | None:
    """The demo prints its commands after a label: `  benchmark   .venv/bin/specserve bench ...`."""
    match = re.search(r"\.venv/bin/(specserve [^#]*)", line)
    return " ".join(match.group(1).split()) if match else None


def _in_checkout(command: str) -> bool:
    """A check / render line whose profile is a file of this repository (or a device, the
    bounded-input example): runnable on any checkout, unlike the docs' /tmp examples."""
    words = shlex.split(command)
    if words[1] not in ("check", "render"):
        return False
    profile = next(w for w in words[2:] if not w.startswith("-"))
    # Absolute /tmp paths are the docs' examples even where such a file happens to exist.
    inside = not profile.startswith("/") and (ROOT / profile).is_file()
    return profile.startswith("/dev/") or inside


def _documented() -> dict[str, set[str]]:
    readme = _code_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    profile_md = _code_lines((ROOT / "docs" / "profile.md").read_text(encoding="utf-8"))
    demo = (ROOT / "scripts" / "demo").read_text(encoding="utf-8")
    printed = demo.split("<<'TXT'", 1)[1].replace("\\\n", " ").splitlines()
    found: dict[str, set[str]] = {}
    for source, lines in (("README.md", readme), ("docs/profile.md", profile_md),
                          ("scripts/demo", printed)):  # fmt: skip
        if source == "scripts/demo":
            commands = {c for c in map(_demo_command, lines) if c}
        else:
            commands = {c for c in map(_command, lines) if c and _in_checkout(c)}
        found[source] = commands
    return found


def test_every_documented_check_and_render_line_is_in_the_matrix():
    documented = _documented()
    # The extraction itself works: these lines are in those files today.
    assert "specserve check profiles/standin-cpu.yaml --configs-only" in documented["README.md"]
    assert documented["docs/profile.md"] and any(" bench " in c for c in documented["scripts/demo"])
    rows = {command for command, _, _ in ROWS}
    missing = {source: sorted(c - rows) for source, c in documented.items() if c - rows}
    assert not missing, f"printed in the docs but not in docs/commands.md: {missing}"


def test_every_command_and_version_has_a_row():
    words = {shlex.split(command)[1] for command, _, _ in ROWS}
    assert not (set(cli.COMMANDS) | {"--version"}) - words
