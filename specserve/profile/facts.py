"""Every fact derived from a deployment profile, decided here once.

Ansible (the `specserve_profile_facts` filter), the exporter, tuning, the launcher and the stand-in
read these instead of working a fact out again; the Helm chart derives at render time only what
Kubernetes needs (GPU resources, ports, the log volume), and tests/helm/test_profile_facts_parity.py
proves the chart's derivations equal these for every shipped and CI profile.

It reads a loaded profile, so it stands above the loader, the model and the tree; the constants
those need sit below them (algorithms.py, endpoints.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specserve.profile.adaptive import adaptive_kept
from specserve.profile.endpoints import (
    HEALTH_PATH,
    LIVENESS_PATH,
    METRICS_PATH,
    probe_host,
    url_host,
)
from specserve.profile.loader import load_profile, read_document
from specserve.profile.model import Profile
from specserve.profile.sglang import sglang_contract
from specserve.profile.tree import effective_tree
from specserve.profile.variants import effective_max_running_requests


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
    gpus_needed: int  # what tp/dp occupy (model.gpus_needed); the checks compare the two
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
    # The running-request cap the server runs with (the pinned SGLang version's resolution): the
    # profile's own, else SGLang's cap under speculation; None: SGLang sizes it from memory.
    max_running_requests: int | None = None
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
        return f"http://{url_host(self.probe_host)}:{self.server_port}"

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
            "max_running_requests": self.max_running_requests or 0,
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
    return ProfileFacts(
        name=profile.name,
        speculating=spec is not None,
        algorithm=None if spec is None else spec.algorithm,
        draft_tokens=None if tree is None else tree.draft_tokens,
        adaptive=adaptive_kept(profile),
        max_running_requests=effective_max_running_requests(profile),
        gpu_count=profile.gpu.count,
        gpus_needed=profile.parallelism.gpus_needed,
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
    profile = load_profile(path)
    return facts(profile, read_document(path))
