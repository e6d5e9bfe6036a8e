"""SGLang's contract for one version, read from committed data extracted from SGLang's own code.

The data files (`data/sglang-<version>.json`) are written by `scripts/sglang/extract_contract.py`
running inside that version's SGLang venv (`scripts/sglang/regenerate <version>`); nothing here
imports SGLang, so the product, the stand-in and the checks can use the facts anywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

DATA_PACKAGE = "specserve.upstream.data"
ADD_VERSION_HINT = (
    "add it to versions.yaml sglang.verified, then run scripts/sglang/regenerate <version>"
)


def _index() -> dict[str, Any]:
    text = resources.files(DATA_PACKAGE).joinpath("versions.json").read_text(encoding="utf-8")
    index: dict[str, Any] = json.loads(text)
    return index


_INDEX = _index()
PINNED_VERSION: str = _INDEX["pinned"]
VERIFIED_VERSIONS: tuple[str, ...] = tuple(_INDEX["verified"])


class UnknownSGLangVersion(KeyError):
    """A version with no committed contract data."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


@dataclass(frozen=True)
class Option:
    """One argparse action of SGLang's server parser (`prepare_server_args`)."""

    flags: tuple[str, ...]
    dest: str
    takes_value: bool
    nargs: int | str | None
    choices: tuple[Any, ...] | None
    default: Any
    type_name: str | None
    action: str  # store, store_true, ... or SGLang's own action class name
    deprecated: bool
    help: str | None
    new_flag: str | None = None  # what a deprecated flag's warning names instead
    required: bool = False


@dataclass(frozen=True)
class Metric:
    """One `sglang:*` metric as SGLang's metrics code declares it."""

    name: str
    type: str  # Gauge, Counter, Histogram, Summary
    labels: frozenset[str]  # names written literally in labelnames
    dynamic_labels: bool  # labelnames also takes a runtime dict (model_name, tp_rank, ...)
    dynamic_label_keys: frozenset[str]  # keys that dict is built with in the declaring file
    series: frozenset[str]  # what /metrics exposes (prometheus_client suffixes applied)


@dataclass(frozen=True)
class Drafter:
    architecture: str
    module: str  # the SGLang file that serves it, e.g. sglang/srt/models/kimi_k25_eagle3.py


def _option(raw: dict[str, Any]) -> Option:
    choices = raw["choices"]
    return Option(
        flags=tuple(raw["flags"]),
        dest=raw["dest"],
        takes_value=raw["takes_value"],
        nargs=raw["nargs"],
        choices=None if choices is None else tuple(choices),
        default=raw["default"],
        type_name=raw["type_name"],
        action=raw["action"],
        deprecated=raw["deprecated"],
        help=raw["help"],
        new_flag=raw.get("new_flag"),
        required=raw.get("required", False),
    )


def _metric(name: str, raw: dict[str, Any]) -> Metric:
    return Metric(
        name=name,
        type=raw["type"],
        labels=frozenset(raw["labels"]),
        dynamic_labels=raw["dynamic_labels"],
        dynamic_label_keys=frozenset(raw["dynamic_label_keys"]),
        series=frozenset(raw["series"]),
    )


# The block drafters' algorithms; each has its family of classes in the registry data.
BLOCK_DRAFTER_KINDS: tuple[str, ...] = ("DFLASH", "DSPARK")
# Which --speculative-algorithm values load each drafter family (NEXTN is SGLang's alias of
# EAGLE; MTP/NextN classes are the EAGLE path's own layers).
DRAFTER_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "EAGLE3": ("EAGLE3",),
    "EAGLE": ("EAGLE", "NEXTN"),
    "MTP": ("EAGLE", "NEXTN"),
    "DFLASH": ("DFLASH",),
    "DSPARK": ("DSPARK",),
}


class SGLangContract:
    """What one SGLang version accepts, serves and exposes (see docs/sglang-contract.md)."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw  # the whole extracted document, for facts without an accessor yet
        self.version: str = raw["sglang_version"]
        self.allow_abbrev: bool = raw["parser"]["allow_abbrev"]
        self.options: tuple[Option, ...] = tuple(_option(o) for o in raw["options"])
        self._by_flag = {flag: o for o in self.options for flag in o.flags}
        models = raw["models"]
        self.eagle3_drafters = tuple(Drafter(**d) for d in models["eagle3_drafters"])
        self.eagle_drafters = tuple(Drafter(**d) for d in models["eagle_drafters"])
        self.mtp_drafters = tuple(Drafter(**d) for d in models["mtp_drafters"])
        self.eagle3_drafter_architectures = frozenset(d.architecture for d in self.eagle3_drafters)
        self.eagle_drafter_architectures = frozenset(d.architecture for d in self.eagle_drafters)
        self.mtp_drafter_architectures = frozenset(d.architecture for d in self.mtp_drafters)
        # Block drafters, one family per algorithm (extract_contract.py's module rule).
        self.block_drafters: dict[str, tuple[Drafter, ...]] = {
            kind: tuple(Drafter(**d) for d in models[f"{kind.lower()}_drafters"])
            for kind in BLOCK_DRAFTER_KINDS
        }
        self.served_architectures = frozenset(models["served_architectures"])
        # ModelConfig._config_draft_model: a target's class given as the drafter is loaded as its
        # MTP / NextN layers (DeepseekV3ForCausalLM -> DeepseekV3ForCausalLMNextN).
        rewrites = raw["draft_rewrites"]
        self._draft_by_arch: dict[str, tuple[str, ...]] = {
            k: tuple(v) for k, v in rewrites["by_architecture"].items()}
        self._draft_by_model_type: dict[str, tuple[str, ...]] = {
            k: tuple(v) for k, v in rewrites["by_model_type"].items()}
        self.metrics: dict[str, Metric] = {
            name: _metric(name, m) for name, m in raw["metrics"].items()
        }
        self.metric_names = frozenset(self.metrics)
        self.metric_series = frozenset(s for m in self.metrics.values() for s in m.series)
        routes = raw["endpoints"]["routes"]
        self.endpoints = frozenset(routes)
        self._methods = {path: frozenset(r["methods"]) for path, r in routes.items()}
        auth = raw["endpoints"]["auth"]
        self.auth_exempt_prefixes: tuple[str, ...] = tuple(auth["exempt_prefixes"])
        self.auth_exempt_methods = frozenset(auth["exempt_methods"])
        self.facts: dict[str, Any] = raw["facts"]

    def __repr__(self) -> str:
        return f"SGLangContract({self.version!r})"

    # Options ---------------------------------------------------------------------------------
    @property
    def flags(self) -> frozenset[str]:
        return frozenset(self._by_flag)

    def option(self, flag: str) -> Option | None:
        """The option for an exact flag spelling (aliases included); never an abbreviation."""
        return self._by_flag.get(flag.split("=", 1)[0])

    def abbreviation_matches(self, prefix: str) -> tuple[str, ...]:
        """Long flags argparse would consider for `prefix` (allow_abbrev); >1 means ambiguous."""
        if prefix in self._by_flag:
            return (prefix,)
        if not self.allow_abbrev or not prefix.startswith("--"):
            return ()
        return tuple(sorted(f for f in self._by_flag if f.startswith(prefix)))

    # Models ----------------------------------------------------------------------------------
    def drafter_kind(self, architecture: str) -> str | None:
        """ "EAGLE3", "EAGLE", "MTP", "DFLASH" or "DSPARK" for a drafter class this version
        serves, else None."""
        if architecture in self.eagle3_drafter_architectures:
            return "EAGLE3"
        if architecture in self.eagle_drafter_architectures:
            return "EAGLE"
        if architecture in self.mtp_drafter_architectures:
            return "MTP"
        for kind, drafters in self.block_drafters.items():
            if any(d.architecture == architecture for d in drafters):
                return kind
        return None

    def draft_classes(self, architecture: str, model_type: str | None) -> tuple[str, ...]:
        """The classes SGLang may load for a drafter whose config.json declares `architecture`
        first: its own, or what `_config_draft_model` rewrites it to (the algorithm picks among
        several: DeepseekV4 -> DSpark or NextN)."""
        if model_type in self._draft_by_model_type:
            return self._draft_by_model_type[model_type]  # type: ignore[index]
        return self._draft_by_arch.get(architecture, (architecture,))

    def draft_class_sources(self) -> tuple[str, ...]:
        """Target classes SGLang loads as their own MTP / NextN layers when given as drafter."""
        return tuple(sorted(self._draft_by_arch))

    def drafter_module(self, architecture: str) -> str | None:
        """The srt/models file that serves a drafter class."""
        families = (self.eagle3_drafters, self.eagle_drafters, self.mtp_drafters,
                    *self.block_drafters.values())  # fmt: skip
        return next((d.module for f in families for d in f if d.architecture == architecture),
                    None)  # fmt: skip

    # Metrics ---------------------------------------------------------------------------------
    def metric_labels(self, name: str) -> frozenset[str]:
        """Every label name the metric can carry: literal ones plus the runtime dict's keys."""
        metric = self.metrics.get(name)
        if metric is None:
            raise KeyError(f"SGLang {self.version} declares no metric {name!r}")
        return metric.labels | metric.dynamic_label_keys

    # Endpoints -------------------------------------------------------------------------------
    def endpoint_methods(self, path: str) -> frozenset[str]:
        return self._methods.get(path, frozenset())

    def auth_exempt(self, path: str, method: str = "GET") -> bool:
        """Whether SGLang's API-key middleware lets `method path` through without a key."""
        return method.upper() in self.auth_exempt_methods or any(
            path.startswith(prefix) for prefix in self.auth_exempt_prefixes
        )

    # Facts -----------------------------------------------------------------------------------
    @property
    def speculative_algorithms(self) -> frozenset[str]:
        """Builtin names and aliases `--speculative-algorithm` accepts (upper case)."""
        spec = self.facts["speculative_algorithm"]
        return frozenset(spec["builtins"]) | frozenset(spec["aliases"])

    @property
    def speculative_algorithm_case_insensitive(self) -> bool:
        return bool(self.facts["speculative_algorithm"]["case_insensitive"])

    @property
    def eagle_max_running_requests_cap(self) -> int:
        """max_running_requests SGLang sets under EAGLE-family speculation when it is unset."""
        return int(self.facts["max_running_requests_cap"]["eagle_family"])

    def default_tree(self, target_architecture: str, algorithm: str = "EAGLE3") -> tuple[int, ...]:
        """(steps, top-k, draft tokens) SGLang picks when all three are unset."""
        tree = self.facts["speculative_tree_defaults"]
        by_algorithm = tree["by_algorithm"]
        if algorithm.upper() in by_algorithm:
            return tuple(by_algorithm[algorithm.upper()])
        return tuple(tree["by_architecture"].get(target_architecture, tree["default"]))

    @property
    def cuda_graph_backend_decode_choices(self) -> tuple[str, ...]:
        return tuple(self.facts["cuda_graph_backend_decode_choices"] or ())

    @property
    def health_generation_default(self) -> bool:
        """SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION's default: /health runs a generation."""
        return bool(self.facts["health"]["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"]["default"])

    @property
    def request_spec_details(self) -> dict[str, Any]:
        """How a finished request's speculative details come back: the meta_info keys of the
        native routes, and the OpenAI routes' request switch and response path."""
        return dict(self.facts["request_spec_details"])


@cache
def sglang_contract(version: str = PINNED_VERSION) -> SGLangContract:
    """The contract of a verified SGLang version (cached)."""
    data = resources.files(DATA_PACKAGE).joinpath(f"sglang-{version}.json")
    if version not in VERIFIED_VERSIONS or not data.is_file():
        raise UnknownSGLangVersion(
            f"no SGLang contract data for version {version!r}; verified versions: "
            f"{', '.join(VERIFIED_VERSIONS)}. To add one, {ADD_VERSION_HINT}"
        )
    raw = json.loads(data.read_text(encoding="utf-8"))
    if raw.get("sglang_version") != version:
        raise UnknownSGLangVersion(
            f"{data.name} holds SGLang {raw.get('sglang_version')!r}, not {version!r}; "
            f"rerun scripts/sglang/regenerate {version}"
        )
    return SGLangContract(raw)
