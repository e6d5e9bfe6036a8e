"""The README is a user's guide that stays true: it links every docs page, docs/layout.md's table
names every top-level folder and every specserve subpackage, its test command is what CI runs,
and the exporter's flags are all documented. That every link of every page resolves is
tests/docs/test_links.py's."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

from specserve_exporter.config import build_parser
from tests.docs.test_links import links

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_readme_links_every_doc_page() -> None:
    readme = README.read_text(encoding="utf-8")
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in links(readme)}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")}
    assert not pages - linked, f"docs pages the README does not link: {sorted(pages - linked)}"


LAYOUT = ROOT / "docs" / "layout.md"


def _layout_paths() -> set[str]:
    section = LAYOUT.read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {p.rstrip("/") for row in rows for p in re.findall(r"`([^`]+)`", row.split(" | ")[0])}


def _ignored(name: str) -> bool:
    patterns = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    return any(fnmatch.fnmatch(name + "/", p.lstrip("/")) or fnmatch.fnmatch(name, p.strip("/"))
               for p in patterns)


def test_layout_lists_every_top_level_folder_and_subpackage() -> None:
    folders = {p.name for p in ROOT.iterdir()
               if p.is_dir() and not p.name.startswith(".") and not _ignored(p.name)}
    subpackages = {f"specserve/{p.parent.name}" for p in (ROOT / "specserve").glob("*/__init__.py")}
    listed = _layout_paths()
    assert {"ansible", "specserve/bench", "specserve/upstream", "tests"} <= folders | subpackages
    missing = sorted((folders - {"specserve"} | subpackages) - listed)
    assert not missing, f"docs/layout.md's table does not list: {missing}"
    stale = sorted(p for p in listed if not (ROOT / p).exists())
    assert not stale, f"docs/layout.md's table lists paths that do not exist: {stale}"


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (command,) = re.findall(r"^exec (.+)$", ci, flags=re.M)
    block = re.search(r"## Two commands.*?```bash\n(.*?)```", README.read_text(encoding="utf-8"),
                      flags=re.S)
    assert block, "README lost its '## Two commands' code block"
    commands = [shlex.split(line.split("#")[0]) for line in block.group(1).splitlines()]
    assert shlex.split(command) in commands, f".ci/run runs {command!r}; the README does not"
    for argv in commands:
        assert (ROOT / argv[1]).is_file(), f"README's command {argv} names no script"


def test_docs_list_every_exporter_flag() -> None:
    doc = (ROOT / "docs" / "exporter.md").read_text(encoding="utf-8")
    flags = {s for a in build_parser()._actions for s in a.option_strings if s.startswith("--")}
    flags -= {"--help", "--speculative-num-draft-tokens"}  # argparse's; an alias of --draft-tokens
    missing = sorted(f for f in flags if f"`{f}`" not in doc)
    assert not missing, f"docs/exporter.md does not document {missing}"


def test_the_algorithms_page_has_a_row_for_every_algorithm_sglang_ships() -> None:
    """docs/algorithms.md's table: every profile choice in its `drafter.algorithm` column, and
    every SGLang built-in the schema refuses as a refused row; nothing else."""
    from specserve.profile.algorithms import REFUSED_ALGORITHMS, SPECULATIVE_ALGORITHMS

    rows = [line.split("|") for line in (ROOT / "docs" / "algorithms.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("| [")]  # fmt: skip
    listed = {name for row in rows for name in re.findall(r"`([A-Z0-9_]+)`", row[2])}
    assert listed == set(SPECULATIVE_ALGORITHMS)
    refused = {re.sub(r"[^A-Z0-9_]", "", row[1].split("]")[0]) for row in rows
               if row[2].strip() == "refused"}  # fmt: skip
    assert refused == set(REFUSED_ALGORITHMS)
