"""Every check `specserve check` runs, in one place: run_checks(profile, options) -> issues."""

from __future__ import annotations

from specserve.profile.checks.context import CheckOptions, ModelContext, build_context
from specserve.profile.checks.envvars import check_env
from specserve.profile.checks.parallelism import check_parallelism
from specserve.profile.checks.server import check_server
from specserve.profile.checks.speculative import check_drafter_config, check_speculative
from specserve.profile.checks.weights import check_weights
from specserve.profile.issues import Issue
from specserve.profile.model import Profile

__all__ = ["CheckOptions", "run_checks"]


def run_checks(profile: Profile, options: CheckOptions | None = None) -> list[Issue]:
    options = options or CheckOptions()
    ctx: ModelContext = build_context(profile, options)
    issues: list[Issue] = list(ctx.issues)
    issues += check_speculative(profile)
    issues += check_drafter_config(profile, ctx)
    issues += check_parallelism(profile)
    issues += check_server(profile)
    issues += check_env(profile)
    if not options.configs_only:
        issues += check_weights(profile, ctx)
    return issues
