"""The `specserve` command: one entry point whose subcommands live with the code they drive.

Each subpackage owns a ``cli.py`` with ``register(subparsers)``; this module only wires them up,
so a subcommand's flags are defined next to the code that implements them.

Only the module that owns the command being run is imported (``COMMANDS``): `specserve check`
does not load the Grafana SDK, requests or prometheus_client that other commands need, which
took `check` and `render` from 0.28 s to under 0.2 s of CPU (docs/benchmarks.md, "CLI startup";
tests/test_cli.py guards it). `specserve --help`, a command name that is not known, and
``build_parser()`` without an argv import them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

# Command -> the module whose register() adds it. The order is the order in `specserve --help`.
# tests/test_cli.py proves each module registers exactly the commands listed for it here.
COMMANDS: dict[str, str] = {
    "check": "specserve.profile.cli",
    "render": "specserve.profile.cli",
    "profile-schema": "specserve.profile.cli",
    "rules": "specserve.monitoring.cli",
    "nccl-bench": "specserve.nccl.cli",
    "bench": "specserve.bench.cli",
    "verify": "specserve.verify.cli",
    "tune": "specserve.tune.cli",
    "diagnose": "specserve.diagnose.cli",
    "generate": "specserve.generate.command",
}
SUBCOMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


class SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that reports an unknown argument itself.

    argparse hands a subparser's unrecognised arguments up to the top-level parser, which then
    prints `usage: specserve [-h] COMMAND ...` and none of the subcommand's options. Refusing
    them here prints the usage of the command that was mistyped (`usage: specserve render ...`).
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _VersionAction(argparse.Action):
    """`--version`: read from the installed package's metadata only when asked for."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: Any = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


def version_text() -> str:
    """`specserve 0.1.0 (SGLang: pinned 0.5.21; verified 0.5.21, 0.5.23)`: the package's version
    from its installed metadata, and the SGLang versions of the packaged contract data
    (specserve/upstream/data/versions.json, which tests keep equal to versions.yaml)."""
    from importlib.metadata import PackageNotFoundError, version

    from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS

    try:
        own = version("specserve")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        own = "unknown (not installed: pip install -e .)"
    return (
        f"specserve {own} (SGLang: pinned {PINNED_VERSION}; "
        f"verified {', '.join(VERIFIED_VERSIONS)})"
    )


def _modules_for(argv: Sequence[str] | None) -> tuple[str, ...]:
    """The modules to import for this command line: the one owning its command, else all."""
    if argv is None:
        return SUBCOMMAND_MODULES
    words = list(argv)
    # The top-level parser has no option that takes a value: the first word is the command.
    at = next((i for i, word in enumerate(words) if not word.startswith("-")), len(words))
    before = words[:at]
    if "--version" in before:
        return ()  # its action prints and exits before a command is read
    if "-h" in before or "--help" in before or at == len(words):
        return SUBCOMMAND_MODULES  # the top-level help lists every command
    return (COMMANDS[words[at]],) if words[at] in COMMANDS else SUBCOMMAND_MODULES


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `specserve` parser: every subcommand, or with `argv` only the one it runs."""
    parser = argparse.ArgumentParser(
        prog="specserve",
        description=(
            "Validate, render and launch an SGLang speculative-decoding deployment profile."
        ),
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print specserve's version and the SGLang versions it checks for, then exit",
    )
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=SubcommandParser
    )
    for module_name in _modules_for(argv):
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(args_list)
    args = parser.parse_args(args_list)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
