"""Named NCCL presets per platform, and validation of NCCL environment values.

Values follow NCCL's "Environment Variables" page (docs.nvidia.com/deeplearning/nccl/user-guide/
docs/env.html). Every tuning variable the field notes set (PROTO, ALGO, P2P_LEVEL, MAX_NCHANNELS,
BUFFSIZE, NTHREADS) sits in that page's "Debugging" section: NCCL documents them as not for
production unless measured, so the default preset sets nothing and the field notes' values are a
named, opt-in preset that records where they came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal

from specserve.profile.issues import Issue, error, warning

Topology = Literal["pcie", "nvlink", "any"]
TOPOLOGIES: tuple[str, ...] = ("pcie", "nvlink", "any")


@dataclass(frozen=True)
class NcclPreset:
    name: str
    description: str
    topology: Topology
    env: dict[str, str] = field(default_factory=dict)


PRESETS: dict[str, NcclPreset] = {
    preset.name: preset
    for preset in (
        NcclPreset(
            name="default",
            description=(
                "Sets nothing: NCCL picks algorithm, protocol and channels from the topology it "
                "detects. The safe choice until a measurement says otherwise."
            ),
            topology="any",
            env={},
        ),
        NcclPreset(
            name="pcie-8gpu-seeds",
            description=(
                "The field notes' hand-tuned values for 8x RTX PRO 6000 Blackwell on PCIe only (no "
                "NVLink), used for every measured run there (90 tok/s baseline, 82.3 tok/s "
                "EAGLE-3). All six are NCCL 'debugging' variables: keep them only while a "
                "measurement on the same machine shows they help."
            ),
            topology="pcie",
            env={
                "NCCL_PROTO": "LL",
                "NCCL_ALGO": "Ring",
                "NCCL_P2P_LEVEL": "SYS",
                "NCCL_MAX_NCHANNELS": "16",
                "NCCL_BUFFSIZE": "16777216",
                "NCCL_NTHREADS": "512",
            },
        ),
        NcclPreset(
            name="nvlink",
            description=(
                "NVLink / NVSwitch machines (H100, H200, B200 SXM): NCCL's own tuning enables "
                "LL128 and NVLS there and SGLang sets NCCL_NVLS_ENABLE / NCCL_CUMEM_ENABLE itself, "
                "so forcing a protocol or algorithm would only take options away. Sets nothing; "
                "it exists so LL128 / NVLS overrides are accepted (they are refused on pcie)."
            ),
            topology="nvlink",
            env={},
        ),
    )
}

PROTOCOLS: frozenset[str] = frozenset({"ll", "ll128", "simple"})
ALGORITHMS: frozenset[str] = frozenset(
    {"ring", "tree", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"}
)
# NVLS / NVLSTree use NVLink SHARP on NVSwitch: meaningless on a PCIe-only node.
NVLINK_ONLY_ALGORITHMS: frozenset[str] = frozenset({"nvls", "nvlstree"})
P2P_LEVELS: tuple[str, ...] = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
NTHREADS: tuple[int, ...] = (64, 128, 256, 512)
DEBUG_LEVELS: frozenset[str] = frozenset({"VERSION", "WARN", "INFO", "ABORT", "TRACE"})
# What SGLang's engine._set_envs_and_config (0.5.21, 0.5.23) writes at startup over a value the
# deployment set: only when one of these flags is on, and then "1" (unset, it writes "0" itself).
# Without the flag the deployment's value stands. tests/contract/test_nccl_overwrites.py runs
# SGLang's own statements to hold this table to them.
SGLANG_OVERWRITES: dict[str, tuple[str, ...]] = {
    "NCCL_CUMEM_ENABLE": ("--enable-symm-mem",),
    "NCCL_NVLS_ENABLE": ("--enable-nccl-nvls", "--enable-symm-mem"),
}
SGLANG_OVERWRITE_VALUE = "1"


def sglang_overwrites(flags_on: Collection[str]) -> dict[str, str]:
    """Variable -> the flag of `flags_on` that makes SGLang overwrite it with "1"."""
    out: dict[str, str] = {}
    for name, flags in SGLANG_OVERWRITES.items():
        for flag in flags:
            if flag in flags_on:
                out[name] = flag
                break
    return out


# NCCL < 2.24 accepts "a,b" / "^a,b"; 2.24+ also "allreduce:a,b;allgather:c".
_COLLECTIVE_PREFIX = re.compile(r"^[A-Za-z]+:")


def _parse_selection(value: str) -> list[tuple[bool, list[str]]]:
    """Split an NCCL_PROTO / NCCL_ALGO value into (excluded, names) groups."""
    groups: list[tuple[bool, list[str]]] = []
    for part in value.split(";"):
        part = _COLLECTIVE_PREFIX.sub("", part.strip())
        excluded = part.startswith("^")
        names = [n.strip() for n in part.lstrip("^").split(",")]
        groups.append((excluded, names))
    return groups


def _check_selection(
    name: str,
    value: str,
    allowed: frozenset[str],
    nvlink_only: frozenset[str],
    topology: str,
    where: str,
) -> list[Issue]:
    issues: list[Issue] = []
    valid = ", ".join(sorted(allowed))
    for excluded, names in _parse_selection(value):
        for item in names:
            low = item.lower()
            if low not in allowed:
                issues.append(
                    error(
                        where,
                        f"{name}={value!r}: {item!r} is not a value NCCL knows",
                        f"use a comma list of {valid} (case-insensitive), optionally prefixed "
                        "with ^ to exclude",
                    )
                )
            elif low in nvlink_only and not excluded and topology != "nvlink":
                issues.append(
                    error(
                        where,
                        f"{name}={value!r} forces {item} on a {topology} topology; NCCL only "
                        f"enables {item} over NVLink, and forcing it elsewhere risks hangs or "
                        "silent data corruption",
                        f"remove {item} from {name} (or exclude it with ^{item}), or set "
                        "gpu.topology: nvlink if the GPUs really are NVLink-connected",
                    )
                )
    return issues


def _positive_int(name: str, value: str, where: str) -> tuple[int | None, list[Issue]]:
    try:
        number = int(value, 10)
    except ValueError:
        number = None
    if number is None or number <= 0:
        return None, [
            error(where, f"{name}={value!r} is not a positive integer", f"set {name} to e.g. 16")
        ]
    return number, []


def _check_proto(value: str, topology: str, where: str) -> list[Issue]:
    return _check_selection("NCCL_PROTO", value, PROTOCOLS, frozenset({"ll128"}), topology, where)


def _check_algo(value: str, topology: str, where: str) -> list[Issue]:
    return _check_selection("NCCL_ALGO", value, ALGORITHMS, NVLINK_ONLY_ALGORITHMS, topology, where)


def _check_p2p_level(value: str, topology: str, where: str) -> list[Issue]:
    if value.upper() in P2P_LEVELS:
        if value.upper() == "NVL" and topology == "pcie":
            return [
                warning(
                    where,
                    "NCCL_P2P_LEVEL=NVL on a pcie topology disables peer-to-peer entirely "
                    "(there is no NVLink), so traffic goes through host shared memory",
                    "use SYS or PHB on PCIe-only nodes, or drop the variable",
                )
            ]
        return []
    if value.isdigit() and 0 <= int(value) <= 5:
        return [
            warning(
                where,
                f"NCCL_P2P_LEVEL={value} uses the legacy integer form, whose meaning changed "
                "between NCCL versions",
                f"use one of {', '.join(P2P_LEVELS)}",
            )
        ]
    return [
        error(
            where,
            f"NCCL_P2P_LEVEL={value!r} is not a level NCCL knows",
            f"use one of {', '.join(P2P_LEVELS)} (or a legacy integer 0-5)",
        )
    ]


def _check_nthreads(value: str, topology: str, where: str) -> list[Issue]:
    if value.isdigit() and int(value) in NTHREADS:
        return []
    return [
        error(
            where,
            f"NCCL_NTHREADS={value!r} is not accepted by NCCL",
            f"use one of {', '.join(map(str, NTHREADS))} (a multiple of 64 from 64 to 512)",
        )
    ]


def _check_buffsize(value: str, topology: str, where: str) -> list[Issue]:
    number, issues = _positive_int("NCCL_BUFFSIZE", value, where)
    if number is not None and number & (number - 1):
        issues.append(
            warning(
                where,
                f"NCCL_BUFFSIZE={number} is not a power of two",
                "NCCL recommends powers of two, e.g. 4194304 (its default) or 16777216",
            )
        )
    return issues


def _check_channels(name: str) -> Callable[[str, str, str], list[Issue]]:
    def check(value: str, topology: str, where: str) -> list[Issue]:
        return _positive_int(name, value, where)[1]

    return check


def _check_bool(name: str) -> Callable[[str, str, str], list[Issue]]:
    def check(value: str, topology: str, where: str) -> list[Issue]:
        if value in ("0", "1"):
            return []
        return [error(where, f"{name}={value!r} is not 0 or 1", f"set {name} to 0 or 1")]

    return check


def _check_debug(value: str, topology: str, where: str) -> list[Issue]:
    if value.upper() in DEBUG_LEVELS:
        return []
    return [
        error(
            where,
            f"NCCL_DEBUG={value!r} is not a level NCCL knows",
            f"use one of {', '.join(sorted(DEBUG_LEVELS))}",
        )
    ]


_CHECKERS: dict[str, Callable[[str, str, str], list[Issue]]] = {
    "NCCL_PROTO": _check_proto,
    "NCCL_ALGO": _check_algo,
    "NCCL_P2P_LEVEL": _check_p2p_level,
    "NCCL_NTHREADS": _check_nthreads,
    "NCCL_BUFFSIZE": _check_buffsize,
    "NCCL_MAX_NCHANNELS": _check_channels("NCCL_MAX_NCHANNELS"),
    "NCCL_MIN_NCHANNELS": _check_channels("NCCL_MIN_NCHANNELS"),
    "NCCL_P2P_DISABLE": _check_bool("NCCL_P2P_DISABLE"),
    "NCCL_SHM_DISABLE": _check_bool("NCCL_SHM_DISABLE"),
    "NCCL_IB_DISABLE": _check_bool("NCCL_IB_DISABLE"),
    "NCCL_CUMEM_ENABLE": _check_bool("NCCL_CUMEM_ENABLE"),
    "NCCL_NVLS_ENABLE": _check_bool("NCCL_NVLS_ENABLE"),
    "NCCL_DEBUG": _check_debug,
}
# Known and passed through without a value check (free-form strings / paths).
_FREE_FORM: frozenset[str] = frozenset(
    {
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_SOCKET_IFNAME",
        "NCCL_TOPO_FILE",
        "NCCL_TOPO_DUMP_FILE",
        "NCCL_IB_HCA",
        "NCCL_NET",
        "NCCL_NET_PLUGIN",
    }
)


def validate_nccl_env(
    env: Mapping[str, str],
    topology: str,
    field_prefix: str = "nccl",
    overwritten: Mapping[str, str] | None = None,
) -> list[Issue]:
    """Check NCCL variables against NCCL's documented values for a `topology` (pcie|nvlink|any);
    `overwritten` (sglang_overwrites of the server's flags) names what SGLang replaces."""
    issues: list[Issue] = []
    if topology not in TOPOLOGIES:
        issues.append(
            error(
                f"{field_prefix}",
                f"unknown topology {topology!r}",
                f"use one of {', '.join(TOPOLOGIES)}",
            )
        )
    for name, value in env.items():
        where = f"{field_prefix}.{name}"
        if not name.startswith("NCCL_"):
            issues.append(
                error(
                    where,
                    f"{name} is not an NCCL variable",
                    "put non-NCCL environment variables under env:, not nccl:",
                )
            )
            continue
        if not isinstance(value, str):
            issues.append(error(where, f"{name} must be a string", f'quote it: {name}: "{value}"'))
            continue
        flag = (overwritten or {}).get(name)
        if flag is not None and value != SGLANG_OVERWRITE_VALUE:
            issues.append(
                warning(
                    where,
                    f"SGLang sets {name}={SGLANG_OVERWRITE_VALUE} at startup because of {flag} "
                    f"(engine._set_envs_and_config), so {value!r} has no effect",
                    f"remove {name}, or drop {flag}",
                )
            )
        checker = _CHECKERS.get(name)
        if checker is not None:
            issues.extend(checker(value, topology, where))
        elif name not in _FREE_FORM:
            issues.append(
                warning(
                    where,
                    f"{name} is not a variable specserve knows how to validate (typo?)",
                    "check the spelling against NCCL's environment variable reference",
                )
            )
    lo, hi = env.get("NCCL_MIN_NCHANNELS", ""), env.get("NCCL_MAX_NCHANNELS", "")
    if lo.isdigit() and hi.isdigit() and int(lo) > int(hi):
        issues.append(
            error(
                f"{field_prefix}.NCCL_MIN_NCHANNELS",
                f"NCCL_MIN_NCHANNELS={lo} is above NCCL_MAX_NCHANNELS={hi}",
                "make the minimum no larger than the maximum",
            )
        )
    return issues


def preset_env(name: str) -> dict[str, str]:
    """The environment of preset `name`; KeyError names the presets that exist."""
    if name not in PRESETS:
        raise KeyError(f"unknown NCCL preset {name!r}: use one of {', '.join(PRESETS)}")
    return dict(PRESETS[name].env)
