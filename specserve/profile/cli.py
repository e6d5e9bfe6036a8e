"""`specserve check`, `specserve render` and `specserve profile-schema`."""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.issues import Issue, errors
from specserve.profile.loader import ProfileError, load_profile
from specserve.profile.model import Profile
from specserve.profile.nodes import Placement, PlacementError, placement_options
from specserve.profile.render import FORMATS, render
from specserve.profile.report import format_text, write_report
from specserve.profile.schema import profile_schema
from specserve.profile.sglang import VERSION_ENV, SglangVersionError, resolve_version
from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


def _load(path: Path) -> tuple[Profile | None, list[Issue], int]:
    try:
        return load_profile(path), [], EXIT_OK
    except ProfileError as exc:  # a path that is no profile file (usage) or bad content
        return None, exc.issues, EXIT_USAGE if exc.usage else EXIT_ERRORS


def _usage_line(command: str, issues: list[Issue]) -> str:
    """The one line for a path that is not a profile file: problem and fix."""
    issue = issues[0]
    return f"specserve {command}: {issue.problem}. Fix: {issue.fix}\n"


def _weights_root_problem(root: Path) -> str | None:
    """Why --weights-root cannot be searched (a loop, not a directory); None when it can, or
    when it does not exist (then every model is reported as not on this machine)."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"--weights-root {root}: is a symlink loop (a link that leads back to itself). "
                "Fix: point it at the directory holding the model directories"
            )
        return f"--weights-root {root}: {exc.strerror}. Fix: check the path"
    if not stat.S_ISDIR(st.st_mode):
        return (
            f"--weights-root {root}: is not a directory. "
            "Fix: give the directory holding the model directories"
        )
    return None


def _version(command: str, args: argparse.Namespace) -> str | None:
    """The target SGLang version, or None after printing why it is unusable (usage error)."""
    try:
        return resolve_version(args.sglang_version)
    except SglangVersionError as exc:
        sys.stderr.write(f"specserve {command}: {exc}\n")
        return None


def _check_options(args: argparse.Namespace, version: str) -> CheckOptions:
    """What `check` and `render` check with: the same flags mean the same checks."""
    return CheckOptions(
        weights_root=args.weights_root,
        configs_only=args.configs_only,
        require_models=args.require_models,
        sglang_version=version,
        compare_baseline=not args.no_baseline_check,
        image=args.image,
    )


def _checked(
    command: str, args: argparse.Namespace
) -> tuple[Profile | None, list[Issue], str] | int:
    """Load and check the profile as `check` does (for `check` and `render` alike): the profile
    (None when it did not load), its issues and the SGLang version; or EXIT_USAGE after printing
    why the command line cannot be checked."""
    version = _version(command, args)
    if version is None:
        return EXIT_USAGE
    profile, issues, code = _load(args.profile)
    if code == EXIT_USAGE:
        sys.stderr.write(_usage_line(command, issues))
        return EXIT_USAGE
    problem = _weights_root_problem(args.weights_root) if args.weights_root else None
    if problem is not None:
        sys.stderr.write(f"specserve {command}: {problem}\n")
        return EXIT_USAGE
    if profile is not None:
        issues = run_checks(profile, _check_options(args, version))
    return profile, issues, version


def cmd_check(args: argparse.Namespace) -> int:
    checked = _checked("check", args)
    if isinstance(checked, int):
        return checked
    _, issues, _ = checked
    write_report(sys.stdout, args.profile, issues, args.format)
    return EXIT_ERRORS if errors(issues) else EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    checked = _checked("render", args)
    if isinstance(checked, int):
        return checked
    profile, issues, version = checked
    if errors(issues) or profile is None:
        # Refuse to print a command that `check` would reject: it would be pasted and run.
        sys.stderr.write(format_text(args.profile, issues))
        return EXIT_ERRORS
    placement = Placement(args.node_rank, args.rendezvous_host)
    try:
        rendered = render(profile, version, placement)
    except PlacementError as exc:
        sys.stderr.write(f"specserve render: {exc}\n")
        return EXIT_USAGE
    sys.stdout.write(FORMATS[args.format](rendered))
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


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    """The profile and every option that decides what is checked: `check` and `render` both take
    them, and both run _checked() with them."""
    parser.add_argument("profile", type=Path, help="profile YAML")
    parser.add_argument(
        "--weights-root",
        type=Path,
        default=None,
        help="directory holding the model directories (matched by basename)",
    )
    parser.add_argument(
        "--configs-only",
        action="store_true",
        help="check config.json / index files only, not shard presence (model directories "
        "without weights: the stand-in profile's test fixtures, a controller before download)",
    )
    parser.add_argument(
        "--require-models",
        action="store_true",
        help="a model directory that cannot be found is an error, not a warning",
    )
    parser.add_argument(
        "--image",
        default=None,
        help="the server image the deploy runs; compared with the baseline's recorded image",
    )
    parser.add_argument(
        "--no-baseline-check",
        action="store_true",
        help="do not compare a speculative profile with its baseline's recorded settings "
        "(playbooks/baseline.yml, which re-measures it)",
    )
    _version_option(parser)


def register(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "check",
        help="validate a deployment profile before anything starts",
        description="Validate a profile: schema, speculative decoding vs the drafter's "
        "config.json, parallelism, server flags, NCCL, weights, and a speculative profile "
        "against what its baseline was measured with. Exit 0 ok, 1 errors, 2 usage.",
    )
    _check_arguments(check)
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.set_defaults(handler=cmd_check)

    rend = subparsers.add_parser(
        "render",
        help="print the exact SGLang argv and environment for a profile",
        description="Run the checks `check` runs with the same options, then print the launch "
        "command (the API key is shown only as a reference); a profile they reject is refused "
        "(exit 1, issues on stderr). Exit 0 ok, 1 errors, 2 usage.",
    )
    _check_arguments(rend)
    rend.add_argument("--format", choices=tuple(FORMATS), default="shell")
    placement_options(rend)
    rend.set_defaults(handler=cmd_render)

    schema = subparsers.add_parser("profile-schema", help="print the profile JSON Schema")
    schema.set_defaults(handler=cmd_schema)
