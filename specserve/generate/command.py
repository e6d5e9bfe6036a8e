"""`specserve generate [--check]`: the one command that rewrites every generated file.

A registry of generators: repository-relative path -> function producing the file's text. Each
part of the product plugs in one source of entries (`SOURCES`, in dependency order); a generator
that copies another generated file reads it through `read_source`, which asks that file's own
generator, so one run is consistent and `--check` never passes on a half-updated tree. A
refiner (`REFINERS`) rewrites values inside files, some of them another source's output, which
it reads through `read_source` as well.

    specserve generate            # rewrite what changed, under the current directory
    specserve generate --check    # write nothing; exit 1 naming every stale file and the fix
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specserve import docblocks
from specserve.diagnose.runbooks import BLOCKS as RUNBOOK_BLOCKS
from specserve.generate import ansible_vars, chart_values, pins, values_comments, version_pins
from specserve.generate.chart import ChartError, chart_files
from specserve.monitoring.generate import artefacts as monitoring_files
from specserve.monitoring.reference import BLOCKS as MONITORING_BLOCKS
from specserve.profile.fields import generated_files as profile_generated_files
from specserve.verify.role_files import files as verify_role_files

Produce = Callable[[], str]
Registry = dict[str, Produce]
ReadSource = Callable[[str], str]
# A source of entries; it may read files (hand-written or produced by earlier sources).
Source = Callable[[ReadSource], Mapping[str, Produce]]

_PACKAGE_REPO = Path(__file__).resolve().parents[2]
FIX = "specserve generate"


def profile_field_files(_read: ReadSource) -> Mapping[str, Produce]:
    """The profile field table's files: specserve/profile/schema.json and the field table in
    docs/profile.md (`specserve.profile.fields.generated_files()`, absolute path -> text)."""
    files = {_relative(Path(path)): text for path, text in profile_generated_files().items()}
    return {name: (lambda text=text: text) for name, text in files.items()}


def _relative(path: Path) -> str:
    return (path.relative_to(_PACKAGE_REPO) if path.is_absolute() else path).as_posix()


# Dependency order: the chart copies files the profile and monitoring sources generate.
SOURCES: tuple[Source, ...] = (
    profile_field_files,
    lambda _read: monitoring_files(),
    verify_role_files,
    chart_files,
)

# Sources that may also claim a file an earlier source generates: their generator then reads
# that source's output through `read_source` and rewrites part of it. The version pins
# (specserve/generate/pins.py) rewrite the chart's generated values.yaml as they do the hand-written
# Dockerfiles and role defaults; values.yaml's `# --` comments are rewritten from the values
# schema's descriptions. After SOURCES; before the doc tables, which read those values.
REFINERS: tuple[Source, ...] = (pins.files, values_comments.files)


# The reference tables generated into hand-written docs (specserve/docblocks.py), last: they
# read the chart's generated values schema.
DOC_BLOCKS: tuple[docblocks.Block, ...] = (
    *MONITORING_BLOCKS, *ansible_vars.BLOCKS, *version_pins.BLOCKS, *chart_values.BLOCKS,
    *RUNBOOK_BLOCKS,
)


def doc_tables(root: Path) -> Source:
    return lambda read: docblocks.files(DOC_BLOCKS, root, read)


def registry(root: Path) -> Registry:
    """Every generated file under `root`, each with the function producing its text."""
    entries: Registry = {}
    stages = ((SOURCES, False), (REFINERS, True), ((doc_tables(root),), False))
    for sources, refines in stages:
        for source in sources:
            # A source reads what earlier sources generate from their generators, anything else
            # (its own files' hand-written parts included) from the tree.
            for relative, produce in source(_reader(root, dict(entries))).items():
                if relative in entries and not refines:
                    raise AssertionError(f"two generators claim {relative}")
                entries[relative] = produce
    return entries


def _reader(root: Path, generated: Registry) -> ReadSource:
    def read_source(relative: str) -> str:
        produce = generated.get(relative)
        return produce() if produce else (root / relative).read_text(encoding="utf-8")

    return read_source


def stale(root: Path) -> list[str]:
    """Generated files under `root` that are missing or differ from what their source produces."""
    out: list[str] = []
    for relative, produce in registry(root).items():
        path = root / relative
        if not path.is_file() or path.read_text(encoding="utf-8") != produce():
            out.append(relative)
    return out


def write(root: Path) -> list[str]:
    """Rewrite every stale generated file under `root`; the paths written."""
    texts = {relative: produce() for relative, produce in registry(root).items()}
    written: list[str] = []
    for relative, text in texts.items():
        path = root / relative
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(relative)
    return written


def _fix(root: Path) -> str:
    return FIX if root.resolve() == Path.cwd().resolve() else f"{FIX} --root {root}"


def run(root: Path, check: bool) -> int:
    if not (root / "charts" / "specserve" / "values.yaml").is_file():
        print(f"specserve generate: {root} is not a specserve checkout (no "
              "charts/specserve/values.yaml); run it from the repository root or pass --root",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        return _check(root) if check else _write(root)
    except (ChartError, docblocks.BlockError, pins.PinError) as err:
        print(f"specserve generate: {err}", file=sys.stderr)
        return 2


def _check(root: Path) -> int:
    found = stale(root)
    for relative in found:
        print(f"stale: {relative}", file=sys.stderr)
    if found:
        print(f"{len(found)} generated file(s) differ from their source; "
              f"regenerate with: {_fix(root)}", file=sys.stderr)  # fmt: skip
        return 1
    print(f"all {len(registry(root))} generated files match their source")
    return 0


def _write(root: Path) -> int:
    for relative in write(root):
        print(f"wrote {relative}")
    return 0


def _handle(args: argparse.Namespace) -> int:
    return run(args.root, args.check)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="repository root (default: the current directory)")  # fmt: skip
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming every stale file")  # fmt: skip


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="rewrite (or --check) every generated file: monitoring/, the chart's copies and "
        "values schema, the profile schema, docs tables and every copy of a versions.yaml pin",
        description=__doc__.splitlines()[0],
    )
    _add_arguments(parser)
    parser.set_defaults(handler=_handle)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specserve generate", description=__doc__)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args.root, args.check)


if __name__ == "__main__":
    sys.exit(main())
