"""Every check `specserve check` runs, in one place: run_checks(profile, options) -> issues."""

from __future__ import annotations

from dataclasses import replace

from specserve.profile.checks.baseline import check_baseline
from specserve.profile.checks.context import CheckOptions, ModelContext, build_context
from specserve.profile.checks.envvars import check_env
from specserve.profile.checks.execsize import check_exec_size
from specserve.profile.checks.graphcover import check_graph_coverage
from specserve.profile.checks.logs import check_logs
from specserve.profile.checks.nodes import check_nodes
from specserve.profile.checks.parallelism import check_parallelism
from specserve.profile.checks.secrets import check_secrets
from specserve.profile.checks.server import check_server
from specserve.profile.checks.speculative import (
    check_drafter_config,
    check_speculative,
    check_tree_known,
)
from specserve.profile.checks.startup import check_startup
from specserve.profile.checks.tuning import check_tuning_methods
from specserve.profile.checks.weights import check_weights
from specserve.profile.issues import Issue
from specserve.profile.model import Profile
from specserve.profile.sglang import resolve_version, sglang_contract

__all__ = ["CheckOptions", "run_checks"]


def run_checks(profile: Profile, options: CheckOptions | None = None) -> list[Issue]:
    """Every issue of `profile` for the SGLang version of `options` (SglangVersionError if it is
    not a verified one)."""
    options = options or CheckOptions()
    contract = sglang_contract(resolve_version(options.sglang_version))
    ctx: ModelContext = build_context(profile, options)
    issues: list[Issue] = list(ctx.issues)
    issues += check_speculative(profile, contract)
    issues += check_drafter_config(profile, ctx, contract)
    issues += check_tree_known(profile, ctx, contract)
    issues += check_parallelism(profile)
    issues += check_nodes(profile)
    issues += check_server(profile, contract)
    issues += check_graph_coverage(profile, contract)
    issues += check_startup(profile, contract)
    issues += check_logs(profile, contract)
    issues += check_secrets(profile, contract)
    issues += check_env(profile, contract)
    issues += check_exec_size(profile, contract)
    if options.compare_baseline:
        issues += check_baseline(profile, options.image, contract.version)
    if not options.configs_only:
        issues += check_weights(profile, ctx)
    # An alternative's weights are fetched when tuning deploys it, not with the profile's own:
    # its config is judged where it can be read, and missing files are no error here.
    alternatives = replace(options, configs_only=True, require_models=False,
                           compare_baseline=False)  # fmt: skip
    issues += check_tuning_methods(profile, lambda other: run_checks(other, alternatives))
    return issues
