"""`specserve tune`: the decisions of a tuning run, as playbooks/tune.yml calls them on the
controller. Each action prints JSON on stdout; a refusal (a grid, mix or run directory that
cannot be used) exits 1 with the reason on stderr.

    specserve tune plan PROFILE --grid JSON [--points JSON] [--adaptive] [--methods JSON]
    specserve tune start RUN_DIR --points JSON --settings JSON
    specserve tune mark RUN_DIR POINT ok|failed [--reason TEXT]
    specserve tune report RUN_DIR --concurrency C --baseline JSON [--current ID] [--host H]
                          [--mix JSON]

The work is imported only when an action runs: `specserve --help` does not load ruamel.yaml,
the profile checks or matplotlib for it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROG = "specserve tune"
# What the actions need beyond specserve's own dependencies: the profile edit's round-trip YAML
# (the deploy extra) and the report's plot (the bench extra).
EXTRAS = {"ruamel": "deploy", "matplotlib": "bench"}


def _plan(args: argparse.Namespace) -> Any:
    from specserve.tune.plan import tune_points

    return tune_points(args.grid, args.profile, args.points, adaptive=args.adaptive,
                       methods=args.methods)


def _start(args: argparse.Namespace) -> Any:
    from specserve.tune.state import start

    return start(args.run_dir, args.points, args.settings)


def _mark(args: argparse.Namespace) -> Any:
    from specserve.tune.state import mark

    return mark(args.run_dir, args.point, args.status, args.reason)


def _report(args: argparse.Namespace) -> Any:
    from specserve.tune.report import report

    return report(args.run_dir, args.concurrency, args.baseline, args.current, args.host,
                  args.mix)


def _runner(action: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from specserve.tune.errors import TuneError

        try:
            out = action(args)
        except ModuleNotFoundError as exc:
            extra = EXTRAS.get((exc.name or "").split(".")[0])
            if extra is None:
                raise
            print(f"{PROG}: {exc.name} is not installed. Fix: install the {extra} extra, "
                  f"pip install 'specserve[{extra}]' (scripts/setup/python.sh installs it)",
                  file=sys.stderr)
            return 2
        except (TuneError, OSError) as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(out))
        return 0

    return run


def register(subparsers: Any) -> None:
    tune = subparsers.add_parser(
        "tune",
        help="a tuning run's candidates, state, ranking and report (playbooks/tune.yml)",
        description="What playbooks/tune.yml decides on the controller: the candidates, the "
        "run's state.json (resumable), and the ranked report. Each action prints JSON; exit 1 "
        "with the reason on stderr when a setting cannot be used.",
    )
    sub = tune.add_subparsers(dest="tune_command", required=True, metavar="ACTION")

    plan = sub.add_parser(
        "plan",
        help="the candidates: no speculation, the grid, adaptive, other methods; each judged "
        "by the `specserve check` rules",
    )
    plan.add_argument("profile", type=Path, help="the deployment profile to tune")
    plan.add_argument("--grid", type=json.loads, required=True,
                      help="tune_grid as JSON: lists of num_steps, eagle_topk, num_draft_tokens "
                      "(integers or 'steps+1'), optionally nccl_preset")
    plan.add_argument("--points", type=json.loads, default=[],
                      help="tune_points as JSON: explicit points after the grid")
    plan.add_argument("--adaptive", action="store_true",
                      help="also the profile's chain with drafter.adaptive")
    plan.add_argument("--methods", type=json.loads, default=[],
                      help="tune_methods as JSON: whole drafter blocks (default: the profile's "
                      "tuning.methods)")
    plan.set_defaults(handler=_runner(_plan))

    start = sub.add_parser("start", help="start or resume a run (state.json): the pending ids")
    start.add_argument("run_dir", type=Path)
    start.add_argument("--points", type=json.loads, required=True,
                       help="the candidates as `plan` prints them")
    start.add_argument("--settings", type=json.loads, required=True,
                       help="the run's settings; a run directory holding others is refused")
    start.set_defaults(handler=_runner(_start))

    mark = sub.add_parser("mark", help="record how one candidate ended")
    mark.add_argument("run_dir", type=Path)
    mark.add_argument("point")
    mark.add_argument("status", choices=("ok", "failed"))
    mark.add_argument("--reason", default="")
    mark.set_defaults(handler=_runner(_mark))

    report = sub.add_parser("report",
                            help="rank the run; write report.json, report.md and plot.png")
    report.add_argument("run_dir", type=Path)
    report.add_argument("--concurrency", type=int, required=True,
                        help="the concurrency the ranking is made at (without --mix)")
    report.add_argument("--baseline", type=json.loads, required=True,
                        help="the profile's recorded baseline {bucket: tok/s}, for reference")
    report.add_argument("--current", default="", help="the profile's own point id")
    report.add_argument("--host", default="")
    report.add_argument("--mix", type=json.loads, default=None,
                        help="the traffic mix {concurrency: weight} to rank over")
    report.set_defaults(handler=_runner(_report))
