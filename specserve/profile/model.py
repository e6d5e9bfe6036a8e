"""Typed view of a validated profile document.

Dataclasses are built only from documents that passed the JSON Schema, so construction here never
has to re-check types; defaults mirror the schema's `default` annotations.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specserve.profile.facts import NO_SPECULATION, gpus_needed, speculates

DEFAULT_LAUNCH_COMMAND: tuple[str, ...] = ("python3", "-m", "sglang.launch_server")


@dataclass(frozen=True)
class Target:
    path: str
    trust_remote_code: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    context_length: int | None = None
    served_model_name: str | None = None


@dataclass(frozen=True)
class Drafter:
    algorithm: str
    path: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None

    @property
    def enabled(self) -> bool:
        return speculates(self.algorithm)


@dataclass(frozen=True)
class Parallelism:
    tp: int
    dp: int = 1
    enable_dp_attention: bool = False
    ep: int = 1

    @property
    def gpus_needed(self) -> int:
        return gpus_needed(self.tp, self.dp, self.enable_dp_attention)


@dataclass(frozen=True)
class Gpu:
    count: int
    min_memory_gib: float = 0
    topology: str = "any"


@dataclass(frozen=True)
class ApiKeySecret:
    file: str | None = None
    env: str | None = None

    def describe(self) -> str:
        return f"file {self.file}" if self.file else f"env {self.env}"


@dataclass(frozen=True)
class Server:
    launch_command: tuple[str, ...] = DEFAULT_LAUNCH_COMMAND
    host: str = "127.0.0.1"
    port: int = 30000
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    cuda_graph_max_bs: int | None = None
    num_continuous_decode_steps: int | None = None
    disable_custom_all_reduce: bool = False
    enable_metrics: bool = True
    disable_cuda_graph: bool = False
    allow_disable_cuda_graph: bool = False
    api_key: ApiKeySecret | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Nccl:
    preset: str = "default"
    overrides: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Logging:
    file: str | None = None
    max_bytes: int = 100 * 1024 * 1024
    backup_count: int = 5
    decode_log_interval: int | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    target: Target
    parallelism: Parallelism
    gpu: Gpu
    drafter: Drafter | None = None
    server: Server = field(default_factory=Server)
    nccl: Nccl = field(default_factory=Nccl)
    env: dict[str, str] = field(default_factory=dict)
    logging: Logging = field(default_factory=Logging)
    baseline_gen_throughput: dict[str, float] = field(default_factory=dict)
    description: str = ""
    source_path: Path | None = None

    @property
    def speculative(self) -> Drafter | None:
        """The drafter when speculation is on, else None."""
        if self.drafter is None or not self.drafter.enabled:
            return None
        return self.drafter

    @property
    def speculative_draft_tokens(self) -> int | None:
        """Draft tokens per verify step (None when speculation is off); the exporter uses it."""
        spec = self.speculative
        return None if spec is None else spec.num_draft_tokens

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
        if drafter_doc.get("path"):
            drafter_doc["path"] = _resolve_local(drafter_doc["path"], base)
        drafter = Drafter(**drafter_doc)
    server_doc = dict(doc.get("server") or {})
    secret = server_doc.pop("api_key", None)
    if "launch_command" in server_doc:
        server_doc["launch_command"] = tuple(server_doc["launch_command"])
    if "extra_args" in server_doc:
        server_doc["extra_args"] = tuple(server_doc["extra_args"])
    server = Server(**server_doc, api_key=ApiKeySecret(**secret) if secret else None)
    nccl_doc = doc.get("nccl") or {}
    logging_doc = doc.get("logging") or {}
    baseline_doc = (doc.get("baseline") or {}).get("gen_throughput_tok_s") or {}
    return Profile(
        name=doc["name"],
        description=doc.get("description", ""),
        target=Target(**target_doc),
        drafter=drafter,
        parallelism=Parallelism(**doc["parallelism"]),
        gpu=Gpu(**doc["gpu"]),
        server=server,
        nccl=Nccl(
            preset=nccl_doc.get("preset", "default"),
            overrides=dict(nccl_doc.get("overrides") or {}),
        ),
        env=dict(doc.get("env") or {}),
        logging=Logging(**logging_doc),
        baseline_gen_throughput={k: float(v) for k, v in baseline_doc.items()},
        source_path=source_path,
    )
