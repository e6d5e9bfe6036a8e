"""The `specserve` command: one entry point whose subcommands live with the code they drive.

Each subpackage owns a ``cli.py`` with ``register(subparsers)``; this module only wires them up,
so a subcommand's flags are defined next to the code that implements them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Order is the order in `specserve --help`.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "specserve.profile.cli",
    "specserve.monitoring.cli",
    "specserve.nccl.cli",
    "specserve.bench.cli",
    "specserve.verify.cli",
    "specserve.generate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specserve",
        description=(
            "Validate, render and launch an SGLang speculative-decoding deployment profile."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
