"""Typed view of a validated profile document.

Dataclasses are built only from documents that passed the JSON Schema, so construction here never
has to re-check types. Defaults come from the field table (specserve/profile/fields.py), as the
schema's `default` annotations do.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from specserve.profile.algorithms import NO_SPECULATION, speculates
from specserve.profile.fields import BY_PATH, default_of


def _fresh(path: str) -> Callable[[], Any]:
    """A default factory: a copy of the field table's (mutable) default for each instance."""
    return lambda: copy.deepcopy(default_of(path))


@dataclass(frozen=True)
class Target:
    path: str
    trust_remote_code: bool = default_of("target.trust_remote_code")
    tool_call_parser: str | None = default_of("target.tool_call_parser")
    reasoning_parser: str | None = default_of("target.reasoning_parser")
    context_length: int | None = default_of("target.context_length")
    served_model_name: str | None = default_of("target.served_model_name")
    architecture: str | None = default_of("target.architecture")


@dataclass(frozen=True)
class Drafter:
    algorithm: str
    path: str | None = default_of("drafter.path")
    num_steps: int | None = default_of("drafter.num_steps")
    eagle_topk: int | None = default_of("drafter.eagle_topk")
    num_draft_tokens: int | None = default_of("drafter.num_draft_tokens")
    dflash_block_size: int | None = default_of("drafter.dflash_block_size")
    dspark_block_size: int | None = default_of("drafter.dspark_block_size")
    uno_lora_path: str | None = default_of("drafter.uno_lora_path")
    ngram_min_bfs_breadth: int | None = default_of("drafter.ngram_min_bfs_breadth")
    ngram_max_bfs_breadth: int | None = default_of("drafter.ngram_max_bfs_breadth")
    ngram_match_type: str | None = default_of("drafter.ngram_match_type")
    ngram_max_trie_depth: int | None = default_of("drafter.ngram_max_trie_depth")
    ngram_capacity: int | None = default_of("drafter.ngram_capacity")
    adaptive: bool = default_of("drafter.adaptive")
    adaptive_config: str | None = default_of("drafter.adaptive_config")

    @property
    def enabled(self) -> bool:
        return speculates(self.algorithm)


def gpus_needed(tp: int, dp: int, enable_dp_attention: bool) -> int:
    """GPUs a tp/dp layout occupies. With DP attention the DP ranks live inside the TP group;
    without it each DP replica is a full TP group of its own."""
    return tp if enable_dp_attention else tp * dp


@dataclass(frozen=True)
class Parallelism:
    tp: int
    dp: int = default_of("parallelism.dp")
    enable_dp_attention: bool = default_of("parallelism.enable_dp_attention")
    ep: int = default_of("parallelism.ep")

    @property
    def gpus_needed(self) -> int:
        return gpus_needed(self.tp, self.dp, self.enable_dp_attention)


@dataclass(frozen=True)
class Nodes:
    count: int = default_of("nodes.count")
    rendezvous_host: str | None = default_of("nodes.rendezvous_host")
    rendezvous_port: int = default_of("nodes.rendezvous_port")


@dataclass(frozen=True)
class Gpu:
    count: int
    min_memory_gib: float = default_of("gpu.min_memory_gib")
    topology: str = default_of("gpu.topology")


@dataclass(frozen=True)
class ApiKeySecret:
    file: str | None = None
    env: str | None = None

    def describe(self) -> str:
        return f"file {self.file}" if self.file else f"env {self.env}"


@dataclass(frozen=True)
class Server:
    launch_command: tuple[str, ...] = default_of("server.launch_command")
    host: str = default_of("server.host")
    port: int = default_of("server.port")
    mem_fraction_static: float | None = default_of("server.mem_fraction_static")
    max_running_requests: int | None = default_of("server.max_running_requests")
    cuda_graph_max_bs: int | None = default_of("server.cuda_graph_max_bs")
    num_continuous_decode_steps: int | None = default_of("server.num_continuous_decode_steps")
    disable_custom_all_reduce: bool = default_of("server.disable_custom_all_reduce")
    enable_metrics: bool = default_of("server.enable_metrics")
    request_class_label: str | None = default_of("server.request_class_label")
    disable_cuda_graph: bool = default_of("server.disable_cuda_graph")
    allow_disable_cuda_graph: bool = default_of("server.allow_disable_cuda_graph")
    allow_uncaptured_decode: str | None = default_of("server.allow_uncaptured_decode")
    api_key: ApiKeySecret | None = field(default=default_of("server.api_key"))
    extra_args: tuple[str, ...] = default_of("server.extra_args")


@dataclass(frozen=True)
class Nccl:
    preset: str = default_of("nccl.preset")
    overrides: dict[str, str] = field(default_factory=_fresh("nccl.overrides"))


@dataclass(frozen=True)
class Logging:
    file: str | None = default_of("logging.file")
    max_bytes: int = default_of("logging.max_bytes")
    backup_count: int = default_of("logging.backup_count")
    decode_log_interval: int | None = default_of("logging.decode_log_interval")


@dataclass(frozen=True)
class Profile:
    name: str
    target: Target
    parallelism: Parallelism
    gpu: Gpu
    drafter: Drafter | None = None
    server: Server = field(default_factory=Server)
    nodes: Nodes = field(default_factory=Nodes)
    nccl: Nccl = field(default_factory=Nccl)
    env: dict[str, str] = field(default_factory=_fresh("env"))
    logging: Logging = field(default_factory=Logging)
    baseline_gen_throughput: dict[str, float] = field(
        default_factory=_fresh("baseline.gen_throughput_tok_s")
    )
    description: str = ""
    source_path: Path | None = None
    # The schema-valid document: where rows without a typed attribute are read from.
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def document_value(self, path: str) -> Any:
        """A field's value as the profile wrote it, else the table's default (None when it has
        none): for the rows only render reads, which have no attribute here."""
        node: Any = self.document
        for key in path.split("."):
            if not isinstance(node, dict) or node.get(key) is None:
                return BY_PATH[path].default if BY_PATH[path].has_default else None
            node = node[key]
        return node

    @property
    def speculative(self) -> Drafter | None:
        """The drafter when speculation is on, else None."""
        if self.drafter is None or not self.drafter.enabled:
            return None
        return self.drafter

    @property
    def baseline(self) -> dict[str, float]:
        """Non-speculative gen throughput (tok/s) per concurrency bucket; the exporter uses it."""
        return dict(self.baseline_gen_throughput)


def canonical_algorithm(name: str) -> str:
    """`eagle3` -> `EAGLE3` (what SGLang itself does with the value); `none` stays `none`."""
    return name if name == NO_SPECULATION else name.upper()


def _resolve_local(path: str, base: Path | None) -> str:
    # Only explicitly relative paths are resolved: "org/name" must stay a Hugging Face id.
    if base is not None and (path.startswith("./") or path.startswith("../")):
        try:
            return str((base / path).resolve())
        except (OSError, RuntimeError):  # a symlink loop: `check` names it for the field
            return os.path.normpath(base / path)
    return path


def _own(cls: type, doc: dict[str, Any]) -> dict[str, Any]:
    """The keys of a section that `cls` has attributes for (render-only rows stay behind in
    Profile.document)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in doc.items() if k in names}


def profile_from_document(doc: dict[str, Any], source_path: Path | None = None) -> Profile:
    """Build a Profile from a schema-valid document."""
    base = source_path.parent if source_path is not None else None
    target_doc = dict(doc["target"])
    target_doc["path"] = _resolve_local(target_doc["path"], base)
    drafter_doc = doc.get("drafter")
    drafter = None
    if drafter_doc is not None:
        drafter_doc = dict(drafter_doc)
        drafter_doc["algorithm"] = canonical_algorithm(drafter_doc["algorithm"])
        for key in ("path", "adaptive_config"):
            if drafter_doc.get(key):
                drafter_doc[key] = _resolve_local(drafter_doc[key], base)
        drafter = Drafter(**_own(Drafter, drafter_doc))
    server_doc = dict(doc.get("server") or {})
    secret = server_doc.pop("api_key", None)
    if "launch_command" in server_doc:
        server_doc["launch_command"] = tuple(server_doc["launch_command"])
    if "extra_args" in server_doc:
        server_doc["extra_args"] = tuple(server_doc["extra_args"])
    server = Server(**_own(Server, server_doc), api_key=ApiKeySecret(**secret) if secret else None)
    nccl_doc = dict(doc.get("nccl") or {})
    if "overrides" in nccl_doc:
        nccl_doc["overrides"] = dict(nccl_doc["overrides"])
    logging_doc = doc.get("logging") or {}
    baseline_doc = (doc.get("baseline") or {}).get("gen_throughput_tok_s") or {}
    return Profile(
        name=doc["name"],
        description=doc.get("description", ""),
        target=Target(**_own(Target, target_doc)),
        drafter=drafter,
        parallelism=Parallelism(**_own(Parallelism, doc["parallelism"])),
        gpu=Gpu(**_own(Gpu, doc["gpu"])),
        server=server,
        nodes=Nodes(**_own(Nodes, doc.get("nodes") or {})),
        nccl=Nccl(**_own(Nccl, nccl_doc)),
        env=dict(doc.get("env") or {}),
        logging=Logging(**_own(Logging, logging_doc)),
        baseline_gen_throughput={k: float(v) for k, v in baseline_doc.items()},
        source_path=source_path,
        document=doc,
    )
