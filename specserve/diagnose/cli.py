"""`specserve diagnose`: why speculation is below the baseline, accept length low, latency high.

Reads what the bundle already measures (every alert condition, now, from Prometheus; the
profile's own findings from `specserve check`) and prints the ranked causes with their evidence
and fix. Exit status: 0 no cause found, 1 a cause (or an unexplained symptom) found, 2 the
evidence could not be read or the command line is wrong.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from specserve.bench.results import ResultError, load_result
from specserve.diagnose.bench import bench_findings
from specserve.diagnose.causes import ACCEPT_LOW
from specserve.diagnose.evidence import EvidenceError, PrometheusReader, gather
from specserve.diagnose.inventory import InventoryError, targets
from specserve.diagnose.verdict import judge
from specserve.monitoring.overrides import OverridesError, load_overrides_file, resolve_settings
from specserve.profile.issues import Issue

EXIT_HEALTHY, EXIT_FOUND, EXIT_UNREADABLE = 0, 1, 2
DEFAULT_PROMETHEUS = "http://127.0.0.1:9090"


def _profile_issues(path: Path, image: str | None) -> list[Issue]:
    # Imported here: `diagnose` without --profile never loads the profile library's checks.
    from specserve.profile.checks import CheckOptions, run_checks
    from specserve.profile.loader import ProfileError, load_profile

    try:
        profile = load_profile(path)
    except ProfileError as err:
        return list(err.issues)
    # The weights live on the GPU node, not where diagnose runs: configs only. The baseline's
    # likeness is judged: a baseline unlike the profile is a cause of "below the baseline".
    options = CheckOptions(configs_only=True, require_models=False, compare_baseline=True,
                           image=image)  # fmt: skip
    return run_checks(profile, options)


def _from_inventory(args: argparse.Namespace) -> None:
    """Fill what the command line left out from the deployment's inventory."""
    found = targets(args.inventory, args.host)
    args.prometheus = args.prometheus or found.prometheus
    args.overrides = args.overrides or found.overrides
    args.profile = args.profile or found.profile
    sys.stdout.write(f"context: {found.host}: Prometheus {args.prometheus}, overrides "
                     f"{args.overrides or 'none (defaults)'}, profile {args.profile or 'none'}\n")
    if found.note:
        sys.stdout.write(f"context: {found.note}\n")


def _handle(args: argparse.Namespace) -> int:
    try:
        if args.inventory:
            _from_inventory(args)
        args.prometheus = args.prometheus or DEFAULT_PROMETHEUS
        overrides, _ = load_overrides_file(args.overrides) if args.overrides else ({}, "")
        settings = resolve_settings(overrides)
        evidence = gather(PrometheusReader(args.prometheus), settings)
    except (OverridesError, EvidenceError, InventoryError) as err:
        sys.stderr.write(f"specserve diagnose: {err}\n")
        return EXIT_UNREADABLE
    issues = _profile_issues(args.profile, args.server_image) if args.profile else []
    if args.bench:
        try:
            result = load_result(args.bench)
        except ResultError as err:
            sys.stderr.write(f"specserve diagnose: --bench: {err}\n")
            return EXIT_UNREADABLE
        floor = float(settings[ACCEPT_LOW].thresholds["floor"])
        issues += list(bench_findings(result, floor))
    verdict = judge(evidence, issues)
    sys.stdout.write(verdict.render())
    return EXIT_FOUND if verdict.found else EXIT_HEALTHY


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help="rank the causes of a slowdown from what the bundle measures",
        description="Evaluates every alert condition now (Prometheus) and the profile's own "
        "findings, and prints the ranked causes with evidence and fix. Exit 0: no cause found; "
        "1: a cause found; 2: evidence unreadable.",
    )
    parser.add_argument("--prometheus",
                        help=f"Prometheus URL (default: from --inventory, else "
                        f"{DEFAULT_PROMETHEUS})")  # fmt: skip
    parser.add_argument("--inventory", type=Path,
                        help="the Ansible inventory of the deployment: Prometheus' URL, the "
                        "overrides file and the profile from its variables and role defaults")
    parser.add_argument("--host", help="with --inventory: the node (default: the first of the "
                        "'specserve' group)")  # fmt: skip
    parser.add_argument("--overrides", type=Path,
                        help="the deployment's alert overrides file (the one its rules were "
                        "rendered from), so the windows and thresholds match")  # fmt: skip
    parser.add_argument("--profile", type=Path, help="the deployed profile: adds its findings")
    parser.add_argument("--server-image", help="the server image, for the baseline's likeness")
    parser.add_argument("--bench", type=Path,
                        help="a `specserve bench` results.json: acceptance per prompt class and "
                        "per draft position")  # fmt: skip
    parser.set_defaults(handler=_handle)
