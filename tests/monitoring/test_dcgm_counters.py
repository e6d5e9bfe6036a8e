"""Every DCGM_FI_* name specserve reads is the pinned dcgm-exporter's own (issue 32 item 2).

The names come from etc/default-counters.csv of NVIDIA/dcgm-exporter at the pinned tag, copied
into specserve/monitoring/data/; the counters file specserve deploys enables exactly the
commented-out fields the alerts need, so every alert's series exists where specserve deploys it.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from specserve.monitoring import dcgm, metrics
from specserve.monitoring.rules import ALERTS

from .expressions import all_promql_expressions

REPO = Path(__file__).resolve().parents[2]
_DCGM = re.compile(r"\bDCGM_FI_[A-Z0-9_]+")


def _queried() -> set[str]:
    names: set[str] = set()
    for _where, expr in all_promql_expressions():
        names |= set(_DCGM.findall(expr))
    return names


def test_the_counters_file_is_the_pinned_exporters() -> None:
    pins = yaml.safe_load((REPO / "versions.yaml").read_text(encoding="utf-8"))
    tag = pins["upstream_images"]["dcgm_exporter"]["tag"]
    # The image tag is <DCGM version>-<exporter version>-<base>; the git tag is the first two.
    assert tag.startswith(dcgm.SOURCE_TAG + "-"), (
        f"versions.yaml pins dcgm-exporter {tag} but {dcgm.DATA_FILE} is from "
        f"{dcgm.SOURCE_TAG}: copy {dcgm.SOURCE_PATH} of that tag and update dcgm.SOURCE_TAG"
    )
    counters = dcgm.default_counters()
    # Spot checks of the file's own declarations at that tag.
    assert counters["DCGM_FI_DEV_XID_ERRORS"] == dcgm.Counter(
        "DCGM_FI_DEV_XID_ERRORS", "gauge", True
    )
    assert counters["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].enabled is False
    assert counters["DCGM_FI_DRIVER_VERSION"].type == "label"


def test_every_dcgm_name_the_monitoring_reads_is_in_the_counters_file() -> None:
    queried = _queried()
    declared = {value for key, value in vars(metrics).items()
                if key.startswith("DCGM_") and isinstance(value, str)}  # fmt: skip
    assert queried, "no DCGM_FI_* name found in any query: the pattern is broken"
    unknown = (queried | declared) - set(dcgm.default_counters())
    assert not unknown, f"not in the pinned exporter's counters file: {sorted(unknown)}"


def test_the_deployed_file_enables_exactly_what_the_alerts_need() -> None:
    alert_names: set[str] = set()
    for alert in ALERTS:
        alert_names |= set(_DCGM.findall(alert.value_expr))
    counters = dcgm.default_counters()
    off_by_default = {name for name in alert_names if not counters[name].enabled}
    assert off_by_default == set(dcgm.ENABLED)

    deployed = {
        match["name"]
        for line in dcgm.deployed_counters().splitlines()
        if (match := re.match(r"^(?P<name>DCGM_FI_[A-Z0-9_]+)\s*,", line))
    }
    enabled_by_default = {name for name, counter in counters.items() if counter.enabled}
    assert deployed == enabled_by_default | set(dcgm.ENABLED)


def test_the_generated_copies_match() -> None:
    for path in (dcgm.DEPLOYED_PATH, *dcgm.COPIES):
        assert (REPO / path).read_text(encoding="utf-8") == dcgm.deployed_counters(), path
