"""Every fact derived from a deployment profile, decided here once.

Ansible (the `specserve_profile_facts` filter), the exporter, tuning, the launcher and the stand-in
read these instead of working a fact out again; the Helm chart derives at render time only what
Kubernetes needs (GPU resources, ports, the log volume), and tests/helm/test_profile_facts_parity.py
proves the chart's derivations equal these for every shipped and CI profile.

The module imports nothing else of the profile library at run time, so the model and the schema
can take their constants from it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specserve.profile.model import Profile

# The algorithms the product supports (its checks, tuning and gate are written for them); SGLang
# upper-cases the name (speculative_hook.handle_speculative_decoding), so the schema also takes
# the lower-case spelling and the model keeps the canonical upper-case one. The block drafters
# DFLASH and DSPARK (speculative_hook.py `_handle_dflash` / `_handle_dspark`, both verified
# versions) are checked like the others (checks/speculative.py), and so is FROZEN_KV_MTP (a
# Gemma-4 assistant drafter: what SGLang runs EAGLE / NEXTN as with one, `_handle_frozen_kv_mtp`).
# UNO (a LoRA on the target itself, `--uno-lora-path`, FA3 only, TP 1, `_handle_uno`) too
# (checks/uno.py).
SPECULATIVE_ALGORITHMS: tuple[str, ...] = (
    "EAGLE",
    "EAGLE3",
    "NEXTN",
    "STANDALONE",
    "NGRAM",
    "DFLASH",
    "DSPARK",
    "FROZEN_KV_MTP",
    "UNO",
)
# The block drafters: one draft step of a whole block, top-k 1; the block size is the count.
BLOCK_ALGORITHMS: tuple[str, ...] = ("DFLASH", "DSPARK")
# The drafter classes SGLang runs as FROZEN_KV_MTP (`_resolve_speculative_algorithm_alias` promotes
# EAGLE / NEXTN with one, refuses EAGLE3), 0.5.21 and 0.5.23: Gemma 4's assistant drafters.
FROZEN_KV_MTP_DRAFTERS: tuple[str, ...] = (
    "Gemma4AssistantForCausalLM",
    "Gemma4UnifiedAssistantForCausalLM",
)
# SGLang built-ins the profile refuses, with why (schema.py's message): none today. A built-in a
# new SGLang version adds goes here until its checks exist, so it never starts unchecked.
REFUSED_ALGORITHMS: dict[str, str] = {}
NO_SPECULATION = "none"

# A server bound to every address is probed on loopback from its own host.
WILDCARD_HOSTS: tuple[str, ...] = ("0.0.0.0", "::", "")
LOOPBACK = "127.0.0.1"

# SGLang's endpoints (entrypoints/http_server.py). The gate: a real one-token generation, 503
# until warm-up is done. Liveness: answers at once, generates nothing. Prometheus text, served
# only with --enable-metrics (server.enable_metrics).
HEALTH_PATH = "/health_generate"
LIVENESS_PATH = "/ready"
METRICS_PATH = "/metrics"


def speculates(algorithm: object) -> bool:
    """Whether a drafter.algorithm value (any case, as written or canonical) turns speculation
    on: every algorithm but `none`; no value (no drafter) means no speculation."""
    return isinstance(algorithm, str) and algorithm.lower() != NO_SPECULATION


def document_speculates(doc: Mapping[str, Any]) -> bool:
    """`speculates` for a profile document as written (before the schema or the model)."""
    drafter = doc.get("drafter")
    return isinstance(drafter, Mapping) and speculates(drafter.get("algorithm"))


def gpus_needed(tp: int, dp: int, enable_dp_attention: bool) -> int:
    """GPUs a tp/dp layout occupies. With DP attention the DP ranks live inside the TP group;
    without it each DP replica is a full TP group of its own."""
    return tp if enable_dp_attention else tp * dp


def probe_host(host: str) -> str:
    """The address a client on the server's own host uses: loopback for a wildcard bind."""
    return LOOPBACK if host in WILDCARD_HOSTS else host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class ProfileFacts:
    """The derived values of one profile. Absent values are None; `as_ansible_dict` gives the
    plain form Ansible needs."""

    name: str
    speculating: bool
    algorithm: str | None  # canonical (upper case); None when not speculating
    # Draft tokens per verify pass the server starts with: the profile's tree, else SGLang's
    # choice (specserve/profile/tree.py); None when not speculating, or for a tree `check`
    # refuses as unknowable (left to SGLang without target.architecture).
    draft_tokens: int | None
    gpu_count: int  # GPUs the deployment takes (gpu.count; 0: the CPU stand-in)
    gpus_needed: int  # what tp/dp occupy (the `gpus_needed` rule); the checks compare the two
    # (over several nodes with nodes_count x gpu_count)
    gpu_min_memory_gib: float
    gpu_topology: str
    nccl_preset: str
    server_host: str
    server_port: int
    probe_host: str
    enable_metrics: bool
    log_file: str | None
    log_budget_bytes: int  # the rotated log's most bytes on disk: max_bytes x (backups + 1)
    api_key_file: str | None
    api_key_env: str | None
    baseline_tok_s: dict[str, float] = field(default_factory=dict)
    # As written in the profile: the paths the server sees inside its container.
    target_path: str = ""
    drafter_path: str | None = None
    served_model_name: str | None = None
    # drafter.adaptive as SGLang resolves it (off for NGRAM, top-k > 1, DP attention...: `check`
    # refuses those): the server changes steps and draft tokens at run time, so the exporter
    # reads the current draft-token count from its log instead of trusting draft_tokens.
    adaptive: bool = False
    # nodes.count: ranks of one server, one per node (>1: a multi-node group).
    nodes_count: int = 1
    # nodes.rendezvous_host / rendezvous_port: "" where the deploy supplies rank 0's address.
    rendezvous_host: str = ""
    rendezvous_port: int = 0

    @property
    def log_dir(self) -> str | None:
        return os.path.dirname(self.log_file) if self.log_file else None

    @property
    def server_url(self) -> str:
        return f"http://{_url_host(self.probe_host)}:{self.server_port}"

    @property
    def health_url(self) -> str:
        return self.server_url + HEALTH_PATH

    @property
    def ready_url(self) -> str:
        return self.server_url + LIVENESS_PATH

    @property
    def metrics_url(self) -> str | None:
        return self.server_url + METRICS_PATH if self.enable_metrics else None

    @property
    def baseline_text(self) -> str:
        """The baseline as the exporter's --baseline takes it: `1=90,8=533.3`."""
        return ",".join(f"{k}={v:g}" for k, v in self.baseline_tok_s.items())

    def as_ansible_dict(self) -> dict[str, Any]:
        """Plain values for Ansible: "" or 0 for an absent value, never None (Ansible 2.19
        conditionals must be booleans, and a None renders as the string "None")."""
        return {
            "name": self.name,
            "gpu_count": self.gpu_count,
            "gpus_needed": self.gpus_needed,
            "nodes_count": self.nodes_count,
            "rendezvous_host": self.rendezvous_host,
            "rendezvous_port": self.rendezvous_port,
            "gpu_min_memory_gib": self.gpu_min_memory_gib,
            "gpu_topology": self.gpu_topology,
            "nccl_preset": self.nccl_preset,
            "server_host": self.server_host,
            "server_port": self.server_port,
            "probe_host": self.probe_host,
            "server_url": self.server_url,
            "health_url": self.health_url,
            "ready_url": self.ready_url,
            "metrics_url": self.metrics_url or "",
            "enable_metrics": self.enable_metrics,
            "speculative": self.speculating,
            "algorithm": self.algorithm or "",
            "draft_tokens": self.draft_tokens or 0,
            "adaptive": self.adaptive,
            "api_key_file": self.api_key_file or "",
            "api_key_env": self.api_key_env or "",
            "logging_file": self.log_file or "",
            "baseline": self.baseline_text,
            "baseline_tok_s": dict(self.baseline_tok_s),
            "target_path": self.target_path,
            "drafter_path": self.drafter_path or "",
            "served_model_name": self.served_model_name or "",
        }


def facts(profile: Profile, document: Mapping[str, Any] | None = None) -> ProfileFacts:
    """The facts of `profile`. `document` (the profile as written) supplies the model paths as
    written; without it they are the profile's own (relative paths resolved against its file)."""
    from specserve.profile.checks.adaptive import adaptive_kept
    from specserve.profile.tree import effective_tree
    from specserve.upstream import sglang_contract

    spec = profile.speculative
    # The pinned version's choice: every verified version picks the same trees
    # (tests/contract/test_effective_tree.py resolves each with SGLang's code).
    tree = effective_tree(profile, sglang_contract()) if spec is not None else None
    server, log, secret = profile.server, profile.logging, profile.server.api_key
    drafter_path = profile.drafter.path if profile.drafter else None
    target_path = profile.target.path
    if document is not None:
        target_path = document["target"]["path"]
        drafter_path = (document.get("drafter") or {}).get("path")
    par = profile.parallelism
    return ProfileFacts(
        name=profile.name,
        speculating=spec is not None,
        algorithm=None if spec is None else spec.algorithm,
        draft_tokens=None if tree is None else tree.draft_tokens,
        adaptive=adaptive_kept(profile),
        gpu_count=profile.gpu.count,
        gpus_needed=gpus_needed(par.tp, par.dp, par.enable_dp_attention),
        nodes_count=profile.nodes.count,
        rendezvous_host=profile.nodes.rendezvous_host or "",
        rendezvous_port=profile.nodes.rendezvous_port,
        gpu_min_memory_gib=float(profile.gpu.min_memory_gib),
        gpu_topology=profile.gpu.topology,
        nccl_preset=profile.nccl.preset,
        server_host=server.host,
        server_port=server.port,
        probe_host=probe_host(server.host),
        enable_metrics=server.enable_metrics,
        log_file=log.file,
        log_budget_bytes=log.max_bytes * (log.backup_count + 1),
        api_key_file=secret.file if secret else None,
        api_key_env=secret.env if secret else None,
        baseline_tok_s=dict(profile.baseline_gen_throughput),
        target_path=target_path,
        drafter_path=drafter_path,
        served_model_name=profile.target.served_model_name,
    )


def load_facts(path: str | os.PathLike[str]) -> ProfileFacts:
    """Load, schema-check (ProfileError on failure) and derive the facts of the file `path`,
    with the model paths as written in it."""
    from specserve.profile.loader import load_profile, read_document

    profile = load_profile(path)
    return facts(profile, read_document(path))
