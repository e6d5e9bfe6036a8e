"""What each alert of the catalogue means to `specserve diagnose`: a cause, a symptom, or blindness.

An alert's condition is a measured fact about the deployment. Some facts are *symptoms* (the
operator's complaint: below the baseline, accept length low, latency high), some are *causes*
(they explain symptoms: drafts rejected, decode off the CUDA graphs, queueing), and some mean
the bundle cannot see (no decode lines, the exporter down): then every other verdict is
unreliable and that comes first. The table below classifies every alert in
specserve.monitoring.rules.ALERTS; tests/diagnose/test_causes.py fails when one is added
without a place here, so the command never silently ignores a new measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Role(IntEnum):
    """Ranked as written: blindness first, then causes, then symptoms nothing explained."""

    BLIND = 0
    CAUSE = 1
    SYMPTOM = 2


@dataclass(frozen=True)
class Meaning:
    role: Role
    cause: str  # the one-line verdict, in an operator's words
    fix: str
    # What this cause explains (alert names: symptoms, or a broader cause's reading of the same
    # fact): listed under it instead of on their own.
    explains: tuple[str, ...] = ()
    # Within a role, lower comes first (a rejecting drafter before queueing, which it causes).
    rank: int = 50


BELOW = "SpecDecodeBelowBaseline"
ACCEPT_LOW = "SpecDecodeAcceptLengthLow"
TTFT = "SpecServeTimeToFirstTokenHigh"
ITL = "SpecServeInterTokenLatencyHigh"
REPLICA_SLOW = "SpecServeFleetReplicaSlow"
# The SLO burn-rate alerts (docs/slo.md): the users' own complaint, explained by whatever
# explains the latency (every cause that explains _SPEED; queueing and a full KV cache too).
BURN = "SpecServeErrorBudgetBurn"
BURN_SLOW = "SpecServeErrorBudgetBurnSlow"
_SPEED = (BELOW, ACCEPT_LOW, ITL, TTFT, REPLICA_SLOW, BURN, BURN_SLOW)

MEANINGS: dict[str, Meaning] = {
    # --- blind: the evidence itself is missing or wrong ---------------------------------------
    "SpecServeExporterDown": Meaning(
        Role.BLIND, "the exporter is not scraped: every log-derived verdict below is blind",
        "start the exporter (docker ps / kubectl get pod); its log says why it stopped", rank=0),
    "SpecServeLogSourceDown": Meaning(
        Role.BLIND, "the exporter cannot read SGLang's log file: log-derived verdicts are blind",
        "check the log path (profile logging.file) and the exporter's read-only mount", rank=1),
    "SpecServeNoDecodeLines": Meaning(
        Role.BLIND, "no decode line was logged while the server serves: the log-derived "
        "accept length and throughput are blind",
        "set logging.decode_log_interval (SGLang's --decode-log-interval) and log level info",
        rank=2),
    "SpecServeLogLinesRejected": Meaning(
        Role.BLIND, "the exporter rejects SGLang's stats lines: the log format changed",
        "run the exporter version that matches the SGLang image (specserve check --image)",
        rank=3),
    "SpecServeLogFileGap": Meaning(
        Role.BLIND, "the exporter lost part of the log (rotated or truncated faster than read)",
        "raise logging.max_bytes or backups; see the exporter's specserve_log_file_gap_bytes_total",
        rank=4),
    "SpecServeAcceptLengthMismatch": Meaning(
        Role.BLIND, "SGLang's own accept length and the log-derived one disagree: the exporter "
        "lost the log or misreads it", "compare the exporter version with the SGLang image; "
        "check the exporter's log source", rank=5),
    "SpecServeRouterDown": Meaning(
        Role.BLIND, "the router is not scraped: the fleet's rotation and traffic are blind",
        "start the router (the fleet play or the chart's router Deployment)", rank=6),
    # --- causes -------------------------------------------------------------------------------
    "SpecDecodeDraftsRejected": Meaning(
        Role.CAUSE, "the target rejects almost every draft: the wrong algorithm (EAGLE with an "
        "EAGLE-3 drafter) or a drafter that does not match the target",
        "run `specserve check` on the profile; set drafter.algorithm to what the drafter was "
        "trained as (EAGLE3 for an EAGLE-3 drafter), or use the drafter made for this target",
        explains=_SPEED, rank=0),
    "SpecDecodeAcceptAboveDraftTokens": Meaning(
        Role.CAUSE, "accept length is above the draft-token count the exporter was given: the "
        "exporter and the server disagree on the draft tokens",
        "deploy the exporter with the server's profile (both paths pass --profile)",
        explains=(ACCEPT_LOW,), rank=10),
    "SpecDecodeGraphDisabled": Meaning(
        Role.CAUSE, "decode runs without CUDA graphs (about 25% slower in the field notes)",
        "remove what turns decode graphs off (specserve check names it: --disable-cuda-graph, "
        "a graph-less attention backend, ...)", explains=(BELOW, ITL, REPLICA_SLOW), rank=20),
    "SpecDecodeGraphMisses": Meaning(
        Role.CAUSE, "large decode batches run off the captured CUDA graphs (eagerly, slower): "
        "the running-request cap is above the largest captured decode batch",
        "raise cuda_graph_max_bs to the running-request cap, or lower max_running_requests "
        "(specserve check names both)",
        # Where it holds, some batches ran on the graphs: SpecDecodeGraphDisabled's "share of
        # graph passes below 1" is these misses, not graphs off.
        explains=(BELOW, ITL, REPLICA_SLOW, "SpecDecodeGraphDisabled"), rank=21),
    # Fires only while the server's mean clears the floor, so it explains a below-baseline
    # server whose mean looks healthy, and an accept-length low another window of the mean saw.
    "SpecDecodeClassAcceptLengthLow": Meaning(
        Role.CAUSE, "one request class (SGLang's custom label workload_class) accepts too few "
        "drafts while the server's mean is fine: the drafter does not fit that workload",
        "route the class to a server without speculation or with a drafter trained on it, or "
        "fewer draft tokens for it; `specserve bench --kinds CLASS` measures it alone",
        explains=(BELOW, ACCEPT_LOW, REPLICA_SLOW), rank=25),
    "SpecDecodeQueueBacklog": Meaning(
        Role.CAUSE, "requests are queueing: the server is at its running-request cap",
        "add capacity (replicas), or raise the running-request cap where the KV cache allows",
        explains=(TTFT, BELOW, REPLICA_SLOW, BURN, BURN_SLOW), rank=30),
    "SpecDecodeKVCacheNearFull": Meaning(
        Role.CAUSE, "the KV cache is nearly full: requests are retracted or held back",
        "lower the running-request cap or context length, or add memory (mem_fraction_static)",
        explains=(TTFT, ITL, BELOW, REPLICA_SLOW, BURN, BURN_SLOW), rank=31),
    "SpecServeFleetNeedsReplicas": Meaning(
        Role.CAUSE, "the fleet's load needs more replicas than serve it, counting the measured "
        "speculative throughput: every replica runs past its planned utilisation",
        "add a node (Ansible: inventory + deploy.yml; Kubernetes: raise autoscaling.maxReplicas "
        "or the GPU node pool); the alert's value is the replica count the load needs",
        explains=(TTFT, ITL, BELOW), rank=32),
    "SpecServeWorkerOutOfRotation": Meaning(
        Role.CAUSE, "a worker is out of the router's rotation: the rest of the fleet carries "
        "its load", "see why its health check fails (the router's log, the worker's /health)",
        explains=(TTFT, REPLICA_SLOW), rank=40),
    # GPU health (docs/gpu-health.md): a faulty GPU slows or hangs its whole tensor-parallel
    # group, so it explains every speed symptom and ranks before what the software does.
    "SpecServeGpuMissing": Meaning(
        Role.CAUSE, "a node shows fewer GPUs than the profile needs (fallen off the bus, or "
        "the DCGM exporter is down)", "drain the node; nvidia-smi, dmesg | grep -i xid; "
        "reboot, and RMA the GPU if it falls off again", explains=_SPEED, rank=-6),
    "SpecServeGpuXidDrain": Meaning(
        Role.CAUSE, "a GPU logged an XID that means drain this node (ECC, row remap, NVLink, "
        "fallen off the bus)", "drain the node, reset the GPU or reboot; RMA on recurrence",
        explains=_SPEED, rank=-5),
    "SpecServeGpuRowRemapFailure": Meaning(
        Role.CAUSE, "a GPU failed to remap a bad memory row: the bad memory stays in use",
        "keep the node out of rotation and RMA the GPU", explains=_SPEED, rank=-4),
    "SpecServeGpuUncorrectableEcc": Meaning(
        Role.CAUSE, "a GPU had uncorrectable ECC errors: its rank's results are corrupt or lost",
        "drain the node and reset the GPU (the row remap takes effect at reset)",
        explains=_SPEED, rank=-3),
    "SpecServeGpuNvlinkErrors": Meaning(
        Role.CAUSE, "a GPU's NVLinks keep retrying: every all-reduce of its group is slower",
        "drain the node; nvidia-smi nvlink -e; reseat or service the link", explains=_SPEED,
        rank=-2),
    "SpecServeGpuThrottled": Meaning(
        Role.CAUSE, "a GPU's clocks are held down by power or thermal limits: its group "
        "decodes at the slowest GPU's pace", "check cooling and power capping "
        "(nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE)", explains=_SPEED, rank=-1),
    # --- symptoms -----------------------------------------------------------------------------
    BELOW: Meaning(
        Role.SYMPTOM, "speculative decoding is slower than the non-speculative baseline, and "
        "nothing the bundle measures (acceptance, CUDA graphs, queueing, KV cache) explains it: "
        "the verify or draft step itself got slower",
        "compare the GPU clocks and health (nvidia-smi -q -d PERFORMANCE), the NCCL settings "
        "(specserve nccl-bench) and the baseline's conditions (specserve check --image); "
        "re-measure the baseline if the image changed", rank=0),
    ACCEPT_LOW: Meaning(
        Role.SYMPTOM, "accept length is below the break-even floor: this workload's drafts are "
        "rarely accepted (a prompt class the drafter was not trained on?)",
        "bench per prompt class and per draft position (specserve bench); fewer draft tokens, "
        "or a drafter trained on this traffic", rank=10),
    ITL: Meaning(
        Role.SYMPTOM, "inter-token latency is high",
        "see the causes above; with none, the decode step itself is slow (GPU clocks, NCCL)",
        rank=20),
    TTFT: Meaning(
        Role.SYMPTOM, "time to first token is high",
        "long prompts or prefill contention: chunked prefill size, or more replicas", rank=30),
    REPLICA_SLOW: Meaning(
        Role.SYMPTOM, "one replica decodes much slower than the rest of the fleet",
        "compare that node's GPUs, profile and image with the others'; drain it if they differ",
        rank=40),
    BURN: Meaning(
        Role.SYMPTOM, "an SLO burns its error budget fast (label slo: ttft, itl or "
        "availability), and nothing the bundle measures explains it",
        "see docs/slo.md: for latency, the dashboard's SLO row and the latency causes above; "
        "for availability, the router's 5xx (smg_router_upstream_responses_total) and its log",
        rank=5),
    BURN_SLOW: Meaning(
        Role.SYMPTOM, "an SLO spends its error budget faster than it lasts (slow burn)",
        "a ticket: find the slow degradation (docs/slo.md) before the budget is gone", rank=45),
}
