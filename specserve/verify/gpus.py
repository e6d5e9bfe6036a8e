"""The gate's GPU check: a node whose GPUs report an error state is refused before it serves.

Reads one DCGM exporter's /metrics (`specserve verify --dcgm URL`), the series named as the
pinned exporter's counters file names them (specserve.monitoring.metrics, held to that file by
tests/monitoring/test_dcgm_counters.py), and refuses a node where

- a GPU's last XID is one of the drain codes the SpecServeGpuXidDrain alert pages on;
- a GPU counted double-bit (uncorrectable) ECC errors since the driver loaded;
- a GPU failed to remap a row (DCGM_FI_DEV_ROW_REMAP_FAILURE);
- fewer GPUs report than the profile's gpu.count (one fell off the bus, or the driver lost it).

`specserve verify --gpus-only` runs this check alone (gate.run_gpus): the chart's GPU-check init
container in every server pod, which may start before its node's exporter does, so it waits for
an exporter it cannot read yet (check_waiting), and never takes an unread one for a healthy node.

The alerts watch the same fields while the node serves; the gate asks before it does, with the
same codes (rules.DRAIN_XIDS), so the two never disagree on what a drain code is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import requests
from prometheus_client.parser import text_string_to_metric_families

from specserve.monitoring.metrics import (
    DCGM_ECC_DBE_VOLATILE,
    DCGM_GPU_TEMP,
    DCGM_ROW_REMAP_FAILURE,
    DCGM_UNCORRECTABLE_REMAPPED_ROWS,
    DCGM_XID_ERRORS,
)
from specserve.monitoring.rules import DRAIN_XIDS
from specserve.verify.exporters import ScrapeError


@dataclass
class Gpu:
    index: str
    uuid: str = ""
    hostname: str = ""
    values: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        where = f" on {self.hostname}" if self.hostname else ""
        return f"GPU {self.index} ({self.uuid or 'no UUID'}){where}"


_READ = (DCGM_GPU_TEMP, DCGM_XID_ERRORS, DCGM_ECC_DBE_VOLATILE, DCGM_ROW_REMAP_FAILURE,
         DCGM_UNCORRECTABLE_REMAPPED_ROWS)


def parse(text: str) -> list[Gpu]:
    """Every GPU the exposition names (by its `gpu` label), with the health fields it carries."""
    gpus: dict[str, Gpu] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise ScrapeError(f"the DCGM exporter's /metrics is not Prometheus text: {exc}") from None
    for family in families:
        for sample in family.samples:
            # prometheus_client appends `_total` to a counter's samples that lack it (the
            # exporter's DCGM_FI_DEV_ECC_DBE_VOL_TOTAL is read back as ..._TOTAL_total).
            name = sample.name.removesuffix("_total") if family.type == "counter" else sample.name
            if name not in _READ or "gpu" not in sample.labels:
                continue
            labels = sample.labels
            gpu = gpus.setdefault(labels["gpu"], Gpu(labels["gpu"]))
            gpu.uuid = gpu.uuid or labels.get("UUID", "")
            # The label is Hostname at the pinned tag; later exporters spell it hostname.
            gpu.hostname = gpu.hostname or labels.get("Hostname", labels.get("hostname", ""))
            gpu.values[name] = sample.value
    return sorted(gpus.values(), key=lambda g: (len(g.index), g.index))


def judge(gpus: Iterable[Gpu], expected: int, url: str) -> tuple[list[str], list[str]]:
    """(failures, passes): one line per finding, each saying what was read and what it needs."""
    gpus = list(gpus)
    failed: list[str] = []
    seen: list[str] = []
    drain = ", ".join(str(code) for code in DRAIN_XIDS)
    if expected > 0:
        line = (f"GPUs the DCGM exporter sees: {len(gpus)} (need {expected}, the profile's "
                f"gpu.count; {url})")
        (seen if len(gpus) >= expected else failed).append(
            line if len(gpus) >= expected else
            line + ": a GPU fell off the bus or the driver lost it (nvidia-smi -L, dmesg)")
    elif not gpus:
        failed.append(f"GPUs the DCGM exporter sees: none ({url}): is it the DCGM exporter?")
    for gpu in gpus:
        xid = gpu.values.get(DCGM_XID_ERRORS, 0.0)
        if xid in DRAIN_XIDS:
            failed.append(f"{gpu.name}: last XID {xid:g} ({DCGM_XID_ERRORS}), a drain code "
                          f"({drain}): reset the GPU or reboot (runbook "
                          "spec-serve-gpu-xid-drain)")
        dbe = gpu.values.get(DCGM_ECC_DBE_VOLATILE, 0.0)
        if dbe > 0:
            failed.append(f"{gpu.name}: {dbe:g} uncorrectable ECC errors since the driver "
                          f"loaded ({DCGM_ECC_DBE_VOLATILE}): drain and reset the GPU")
        if gpu.values.get(DCGM_ROW_REMAP_FAILURE, 0.0) > 0:
            failed.append(f"{gpu.name}: a row remap failed ({DCGM_ROW_REMAP_FAILURE}): the GPU "
                          "needs service (RMA)")
    if gpus and not any(line.startswith(tuple(g.name for g in gpus)) for line in failed):
        fields = [DCGM_XID_ERRORS, DCGM_ROW_REMAP_FAILURE]
        if any(DCGM_ECC_DBE_VOLATILE in gpu.values for gpu in gpus):
            fields.insert(1, DCGM_ECC_DBE_VOLATILE)
        seen.append(f"GPU error state: none on {len(gpus)} GPUs ({', '.join(fields)})")
    return failed, seen


def check(session: requests.Session, url: str, expected: int,
          timeout: float = 10.0) -> tuple[list[str], list[str]]:
    """Scrape the DCGM exporter and judge its GPUs; ScrapeError when it cannot be read."""
    try:
        response = session.get(url, timeout=timeout)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise ScrapeError(f"the DCGM exporter {url} cannot be read: {exc} (is it running? "
                          "the Ansible role dcgm_exporter, or the chart's dcgmExporter)") from None
    return judge(parse(response.text), expected, url)


def check_waiting(session: requests.Session, url: str, expected: int, wait: float, *,
                  knob: str = "--dcgm-wait", poll: float = 5.0, timeout: float = 10.0,
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> tuple[list[str], list[str]]:
    """check(), trying again while the exporter cannot be read (still starting) for `wait`
    seconds; then ScrapeError naming the URL, the time waited and its knob. An exporter that
    answers is judged at once: a faulty GPU is not retried into a pass."""
    deadline = clock() + wait
    tries = 0
    while True:
        tries += 1
        try:
            return check(session, url, expected, timeout)
        except ScrapeError as exc:
            left = deadline - clock()
            if left <= 0:
                if wait <= 0:
                    raise
                raise ScrapeError(f"{exc}; still unreadable after {wait:g} s and {tries} tries "
                                  f"({knob}): the DCGM exporter must run on this node and "
                                  "serve /metrics; an unread exporter is not a healthy "
                                  "node") from None
            sleep(min(poll, left))
