"""Server options: extra_args must be options of the target SGLang, must not repeat an owned flag,
and decode CUDA graphs stay on unless explicitly allowed.

Every fact is the target version's: its option table (`specserve.upstream`) for spellings,
choices and deprecations, and sglang/srt/arg_groups/cuda_graph_hook.py::parse_cuda_graph_config
for how the CUDA-graph flags combine (0.5.21 and 0.5.23 alike).
"""

from __future__ import annotations

from typing import Any

from specserve.profile.checks.graphs import decode_graph_issues
from specserve.profile.classlabel import RULES_CLASS_LABEL, label_name_problem
from specserve.profile.flags import OWNED_FLAGS, arg_value, flag_spelling
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract, continuous_decode_steps_read, sglang_contract
from specserve.upstream import VERIFIED_VERSIONS


def _unknown_flag(where: str, spelled: str, contract: Contract) -> Issue:
    version = contract.version
    dashed = "--" + spelled[2:].replace("_", "-")
    if dashed != spelled and contract.option(dashed) is not None:
        return error(
            where,
            f"{spelled} is not an option of SGLang {version} (its parser registers dashes only)",
            f"write it {dashed}",
        )
    # Only where that parser allows abbreviations (allow_abbrev) would SGLang read it as one.
    longer = list(contract.abbreviation_matches(spelled))
    if longer:
        return error(
            where,
            f"{spelled} is not an option of SGLang {version}: argparse would take it as an "
            f"abbreviation of {', '.join(longer[:4])}{' ...' if len(longer) > 4 else ''}, which "
            "is ambiguous or changes meaning between versions",
            "spell the option out in full",
        )
    elsewhere = [
        v
        for v in VERIFIED_VERSIONS
        if v != version and sglang_contract(v).option(spelled) is not None
    ]
    if elsewhere:
        return error(
            where,
            f"{spelled} is not an option of SGLang {version} (SGLang {', '.join(elsewhere)} "
            "has it); SGLang would exit at start with 'unrecognized arguments'",
            f"remove it, or target SGLang {elsewhere[0]} (--sglang-version {elsewhere[0]})",
        )
    return error(
        where,
        f"{spelled} is not an option of SGLang {version}; SGLang would exit at start with "
        "'unrecognized arguments'",
        "remove it or correct its spelling (the server's --help lists its options)",
    )


def _owner(opt: Any) -> str | None:
    """The profile field owning any spelling of `opt` (its aliases included), or None."""
    return next((OWNED_FLAGS[f] for f in opt.flags if f in OWNED_FLAGS), None)


def _choices(opt: Any) -> list[str] | None:
    choices = getattr(opt, "choices", None)
    return [str(c) for c in choices] if choices else None


def _extra_arg_issues(profile: Profile, contract: Contract) -> list[Issue]:
    args = profile.server.extra_args
    version = contract.version
    issues: list[Issue] = []
    for i, arg in enumerate(args):
        spelled = flag_spelling(arg)
        if spelled is None:
            continue
        where = f"server.extra_args[{i}]"
        opt = contract.option(spelled)
        dashed = contract.option("--" + spelled[2:].replace("_", "-"))
        if opt is None and (dashed is None or _owner(dashed) is None):
            issues.append(_unknown_flag(where, spelled, contract))
            continue
        owned = _owner(opt or dashed)
        if owned is not None:
            fix = f"remove {spelled} from extra_args and set {owned} instead"
            if owned == "server.disable_cuda_graph":
                fix = (
                    "remove it from extra_args; if you really must, set "
                    "server.disable_cuda_graph: true and server.allow_disable_cuda_graph: true"
                )
            issues.append(error(where, f"{spelled} is owned by the profile field {owned}", fix))
            continue
        if opt is None:  # only its dashed spelling exists, and that one is owned (above)
            continue
        value = arg_value(args, i)
        if opt.takes_value and opt.nargs is None and value is None:
            issues.append(
                error(where, f"{spelled} expects a value", f"give it one: {spelled} VALUE")
            )
            continue
        choices = _choices(opt)
        if choices and opt.takes_value and value is not None and value not in choices:
            issues.append(
                error(
                    where,
                    f"{spelled} {value!r} is not a choice of SGLang {version}; its parser would "
                    "exit at start",
                    f"use one of: {', '.join(choices)}",
                )
            )
        if opt.deprecated:
            issues.append(
                warning(
                    where,
                    f"{spelled} is deprecated in SGLang {version}",
                    f"use {opt.new_flag} instead"
                    if opt.new_flag
                    else f"replace it as its help says: {opt.help or '(no help text)'}",
                )
            )
    return issues


def _no_effect_issues(profile: Profile, contract: Contract) -> list[Issue]:
    steps = profile.server.num_continuous_decode_steps
    if steps is None or continuous_decode_steps_read(contract):
        return []
    return [
        warning(
            "server.num_continuous_decode_steps",
            f"SGLang {contract.version} declares --num-continuous-decode-steps but no code of it "
            f"reads the value, so {steps} has no effect",
            "remove server.num_continuous_decode_steps from the profile",
        )
    ]


def check_server(profile: Profile, contract: Contract) -> list[Issue]:
    srv = profile.server
    issues = _extra_arg_issues(profile, contract)
    issues += decode_graph_issues(profile, contract)
    issues += _no_effect_issues(profile, contract)
    if (
        profile.gpu.topology == "pcie"
        and profile.parallelism.tp > 1
        and not srv.disable_custom_all_reduce
    ):
        issues.append(
            warning(
                "server.disable_custom_all_reduce",
                "on PCIe-only GPUs SGLang's custom all-reduce is not used anyway",
                "set disable_custom_all_reduce: true to make the NCCL path explicit",
            )
        )
    if srv.host not in ("127.0.0.1", "localhost", "::1") and srv.api_key is None:
        issues.append(
            warning(
                "server.api_key",
                f"the server listens on {srv.host} without an API key",
                "set server.api_key: {file: ...} or {env: ...}, or bind to 127.0.0.1",
            )
        )
    issues += _class_label_issues(profile)
    return issues


def _class_label_issues(profile: Profile) -> list[Issue]:
    label = profile.server.request_class_label
    if label is None:
        return []
    problem = label_name_problem(label)
    if problem is not None:
        # SGLang would start, but its collector or Prometheus would refuse or overwrite it.
        return [error("server.request_class_label", problem, "choose another name, e.g. "
                      "workload_class")]
    if label != RULES_CLASS_LABEL:
        return [warning("server.request_class_label",
                        f"the shipped rules read the class from {RULES_CLASS_LABEL}, not "
                        f"{label}: no per-class accept length is recorded",
                        f"name it {RULES_CLASS_LABEL}, or add your own rules for {label}")]
    if not profile.server.enable_metrics:
        return [warning("server.request_class_label",
                        "the class label is only read by SGLang's tokenizer metrics, which "
                        "server.enable_metrics: false turns off",
                        "set enable_metrics: true, or request_class_label: null")]
    return []
