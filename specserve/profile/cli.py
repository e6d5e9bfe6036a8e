"""`specserve check`, `specserve render` and `specserve profile-schema`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Issue, errors
from specserve.profile.loader import ProfileError, load_profile
from specserve.profile.model import Profile
from specserve.profile.render import FORMATS, render
from specserve.profile.report import format_text, write_report
from specserve.profile.schema import profile_schema
from specserve.profile.sglang import VERSION_ENV, SglangVersionError, resolve_version
from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


def _load(path: Path) -> tuple[Profile | None, list[Issue], int]:
    if not path.is_file():
        return None, [], EXIT_USAGE
    try:
        return load_profile(path), [], EXIT_OK
    except ProfileError as exc:
        return None, exc.issues, EXIT_ERRORS


def _version(command: str, args: argparse.Namespace) -> str | None:
    """The target SGLang version, or None after printing why it is unusable (usage error)."""
    try:
        return resolve_version(args.sglang_version)
    except SglangVersionError as exc:
        sys.stderr.write(f"specserve {command}: {exc}\n")
        return None


def cmd_check(args: argparse.Namespace) -> int:
    path: Path = args.profile
    version = _version("check", args)
    if version is None:
        return EXIT_USAGE
    profile, issues, code = _load(path)
    if code == EXIT_USAGE:
        sys.stderr.write(f"specserve check: {path}: no such file\n")
        return EXIT_USAGE
    if profile is not None:
        options = CheckOptions(
            weights_root=args.weights_root,
            configs_only=args.configs_only,
            require_models=args.require_models,
            sglang_version=version,
        )
        issues = run_checks(profile, options)
    write_report(sys.stdout, path, issues, args.format)
    return EXIT_ERRORS if errors(issues) else EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    path: Path = args.profile
    version = _version("render", args)
    if version is None:
        return EXIT_USAGE
    profile, issues, code = _load(path)
    if code == EXIT_USAGE:
        sys.stderr.write(f"specserve render: {path}: no such file\n")
        return EXIT_USAGE
    if profile is not None:
        issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    if errors(issues) or profile is None:
        # Refuse to print a command that `check` would reject: it would be pasted and run.
        sys.stderr.write(format_text(path, issues))
        return EXIT_ERRORS
    sys.stdout.write(FORMATS[args.format](render(profile, version)))
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    schema: dict[str, Any] = profile_schema()
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return EXIT_OK


def _version_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sglang-version",
        default=None,
        metavar="VERSION",
        help=f"SGLang version to check / render for (verified: {', '.join(VERIFIED_VERSIONS)}; "
        f"default: ${VERSION_ENV}, else the pinned {PINNED_VERSION})",
    )


def register(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "check",
        help="validate a deployment profile before anything starts",
        description="Validate a profile: schema, speculative decoding vs the drafter's "
        "config.json, parallelism, server flags, NCCL, weights. Exit 0 ok, 1 errors, 2 usage.",
    )
    check.add_argument("profile", type=Path, help="profile YAML")
    check.add_argument(
        "--weights-root",
        type=Path,
        default=None,
        help="directory holding the model directories (matched by basename)",
    )
    check.add_argument(
        "--configs-only",
        action="store_true",
        help="check config.json / index files only, not shard presence",
    )
    check.add_argument(
        "--require-models",
        action="store_true",
        help="a model directory that cannot be found is an error, not a warning",
    )
    check.add_argument("--format", choices=("text", "json"), default="text")
    _version_option(check)
    check.set_defaults(handler=cmd_check)

    rend = subparsers.add_parser(
        "render",
        help="print the exact SGLang argv and environment for a profile",
        description="Render the launch command (the API key is shown only as a reference).",
    )
    rend.add_argument("profile", type=Path, help="profile YAML")
    rend.add_argument("--format", choices=tuple(FORMATS), default="shell")
    _version_option(rend)
    rend.set_defaults(handler=cmd_render)

    schema = subparsers.add_parser("profile-schema", help="print the profile JSON Schema")
    schema.set_defaults(handler=cmd_schema)
