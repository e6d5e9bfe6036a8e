"""The gate's budgets and floors: one table, read by every place that sets or names one.

`gate.Settings` takes its defaults from here, `specserve verify` builds its flags from here, and
`specserve generate` writes the verify role's defaults and argument specs from here, so a
default changed in this table is the default of the command, the library and the Ansible role
alike (tests/verify/test_gate_options.py changes one and watches each follow).

The accept-length floor has no number of its own: it is the SpecDecodeAcceptLengthLow alert's
floor (the monitoring catalogue, with the deployment's alert overrides), so the gate that puts
a node in rotation and the alert that pages about it never disagree on what "too low" is. The
chart's test pod and the Ansible role both pass the alert's effective floor unless told another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specserve.monitoring.rules import ALERTS_BY_NAME

FLOOR_ALERT = "SpecDecodeAcceptLengthLow"
FLOOR_THRESHOLD = "floor"


def alert_floor(thresholds: dict[str, Any] | None = None) -> float:
    """The accept-length alert's floor: its catalogue default, or the value an overrides file's
    `alerts.SpecDecodeAcceptLengthLow.thresholds.floor` sets (`thresholds`, already validated)."""
    value = (thresholds or {}).get(FLOOR_THRESHOLD)
    if value is None:
        value = ALERTS_BY_NAME[FLOOR_ALERT].threshold(FLOOR_THRESHOLD).default
    return float(value)


@dataclass(frozen=True)
class Option:
    name: str  # the gate.Settings field, and NAME in `specserve verify --knob NAME=LABEL`
    flag: str  # the `specserve verify` flag that sets it
    default: int | float | str | bool | None
    help: str
    role_var: str | None = None  # the verify role's variable for it, when the role sets it
    choices: tuple[str, ...] = ()

    @property
    def kind(self) -> type:
        return type(self.default)


# Ordered as `specserve verify --help` lists them.
OPTIONS: tuple[Option, ...] = (
    Option("prompt", "--prompt",
           "Write a short story about a lighthouse keeper who learns to code.",
           "the warm-up requests' prompt", "verify_warmup_prompt"),
    Option("requests", "--requests", 3,
           "warm-up requests sent to the server before the exporter is read (0: none, e.g. "
           "with --since)", "verify_warmup_requests"),
    Option("max_tokens", "--max-tokens", 256, "tokens each warm-up request asks for",
           "verify_warmup_max_tokens"),
    Option("request_timeout", "--request-timeout", 300.0,
           "seconds each warm-up request (and the health probe) may take",
           "verify_warmup_timeout_s"),
    Option("metrics_timeout", "--metrics-timeout", 60.0,
           "seconds the exporter has to count the warm-up's decode lines",
           "verify_metrics_timeout_s"),
    Option("min_decode_lines", "--min-decode-lines", 1,
           "decode lines the window must hold"),
    Option("floor", "--floor", alert_floor(),
           f"the mean accept length over the window must exceed it, when the profile "
           f"speculates; the default is the {FLOOR_ALERT} alert's floor"),
    Option("require_graph", "--no-require-graph", True,
           "require every decode line to say `cuda graph: True` (unless the profile turns "
           "graphs off)",
           "verify_require_graph"),
    Option("graph_label", "--graph-label", "cuda", "the graph word of the decode lines",
           "verify_graph_label", choices=("cuda", "cpu", "npu", "musa")),
    Option("dcgm", "--dcgm", "",
           "the DCGM exporter's /metrics URL: refuse the node, before any request, when a "
           "GPU's last XID is a drain code, it counted uncorrectable ECC errors or a failed "
           "row remap, or fewer GPUs report than the profile's gpu.count (empty: not checked; "
           "the Ansible verify role then reads the node's own, where dcgm_exporter deploys one)",
           "verify_dcgm_url"),
)
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}


def default(name: str) -> Any:
    return BY_NAME[name].default
