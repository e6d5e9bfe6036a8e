"""The stand-in's deterministic behaviour model and its runtime-editable behaviour file.

Formulas (also in docs/standin.md; tests pin them):

    a      = min(ALPHA_MAX, acceptance * content_factor)     per-draft-token acceptance
    depth  = min(steps, draft_tokens - 1)        (block drafters: draft_tokens - 1, width 1)
    width  = min(topk, (draft_tokens - 1) / steps)            draft-tree nodes per level
    b      = max(1, 1 + TREE_GAIN * (width - 1))               effective tries per level
    p      = 1 - (1 - a) ** b                                  a level is accepted
    E      = 1 + sum(p ** i for i in 1..depth)                 accept length, bonus included

    T1         = 1 / base_tps                                  one target pass, batch of 1
    target(B)  = T1 * (1 + TOKEN_COST * (B - 1))               one pass over B tokens
    baseline   : step = target(bs)                             bs = #running requests
    speculative: step = target(bs * draft_tokens)
                      + steps * DRAFT_COST * T1 * (1 + TOKEN_COST * (bs * topk - 1))
    no graph   : step *= GRAPH_PENALTY        (--disable-cuda-graph, or bs > cuda-graph-max-bs)
    step /= throughput_scale
    gen throughput = bs * E / step            (baseline: E = 1)

DSPARK's verify cap (SGLANG_RAGGED_VERIFY_MODE cap-accept or compact): each verify pass of a
request verifies at most C tokens (SPECSERVE_STANDIN_VERIFY_CAP, default the whole block), so of
the n tokens the pass would accept uncapped it commits min(n, C) and the cap trims the rest.

An EAGLE/NEXTN server whose drafter is an EAGLE-3 model (`LlamaForCausalLMEagle3`) gets a = 0:
E = 1.00 exactly, while it still pays for drafting and verification, so it runs slower than the
baseline, which is what the field notes saw.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ALPHA_MAX = 0.98
TREE_GAIN = 0.25
TOKEN_COST = 0.05
DRAFT_COST = 0.08
# The field notes: 56.7 tok/s with CUDA graphs disabled, 74.9 once enabled.
GRAPH_PENALTY = 74.9 / 56.7
DEFAULT_CONTENT_FACTORS: dict[str, float] = {"code": 1.15, "poem": 0.8}


class BehaviourError(ValueError):
    """The behaviour file cannot be used; the message names the field and the fix."""


@dataclass(frozen=True)
class Behaviour:
    acceptance: float = 0.6
    throughput_scale: float = 1.0
    content_factors: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_CONTENT_FACTORS))

    def content_factor(self, text: str) -> float:
        """Factor of the first configured keyword found in `text` (case-insensitive), else 1."""
        lowered = text.lower()
        for keyword, factor in self.content_factors.items():
            if keyword.lower() in lowered:
                return factor
        return 1.0


_FIELDS = {"acceptance", "throughput_scale", "content_factors"}


def _number(doc: dict[str, Any], key: str, path: Path, low: float, high: float | None) -> float:
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BehaviourError(f"{path}: '{key}' must be a number, got {value!r}")
    value = float(value)
    if value < low or (high is not None and value > high) or math.isnan(value):
        upper = f" and <= {high}" if high is not None else ""
        raise BehaviourError(f"{path}: '{key}' must be >= {low}{upper}, got {value}")
    return value


def parse_behaviour(text: str, path: Path) -> Behaviour:
    """Parse a YAML or JSON behaviour document (JSON is YAML); unknown keys are errors."""
    try:
        doc = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise BehaviourError(f"{path}: not valid YAML/JSON: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise BehaviourError(f'{path}: must be a mapping such as {{"acceptance": 0.7}}')
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise BehaviourError(
            f"{path}: unknown field(s) {', '.join(map(str, unknown))}; "
            f"known fields: {', '.join(sorted(_FIELDS))}"
        )
    base = Behaviour()
    acceptance = _number(doc, "acceptance", path, 0.0, 1.0) if "acceptance" in doc else None
    scale = (
        _number(doc, "throughput_scale", path, 0.001, None) if "throughput_scale" in doc else None
    )
    factors = base.content_factors
    if "content_factors" in doc:
        raw = doc["content_factors"]
        if not isinstance(raw, dict):
            raise BehaviourError(f"{path}: 'content_factors' must map keyword -> factor")
        factors = {}
        for key, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise BehaviourError(
                    f"{path}: content_factors[{key!r}] must be a number >= 0, got {value!r}"
                )
            factors[str(key)] = float(value)
    return Behaviour(
        acceptance=base.acceptance if acceptance is None else acceptance,
        throughput_scale=base.throughput_scale if scale is None else scale,
        content_factors=factors,
    )


class BehaviourSource:
    """The current Behaviour; re-reads its file when the file's mtime or size changes.

    A file that becomes invalid keeps the last good behaviour (nothing is lost) and reports
    the error once through `last_error`, so a test or an operator can see why.
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._current = Behaviour()
        self.last_error: str | None = None
        if path is not None:
            # A bad file at start is a startup error: fail loudly rather than run on defaults.
            self._current = parse_behaviour(path.read_text(encoding="utf-8"), path)
            stat = path.stat()
            self._stamp = (stat.st_mtime_ns, stat.st_size)

    @property
    def path(self) -> Path | None:
        return self._path

    def current(self) -> tuple[Behaviour, str | None]:
        """(behaviour, error) where error is a new reload problem to report, else None."""
        if self._path is None:
            return self._current, None
        with self._lock:
            try:
                stat = self._path.stat()
            except OSError as exc:
                return self._current, self._note(f"{self._path}: cannot stat: {exc}")
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp:
                return self._current, None
            try:
                text = self._path.read_text(encoding="utf-8")
                self._current = parse_behaviour(text, self._path)
            except (OSError, BehaviourError) as exc:
                self._stamp = stamp
                return self._current, self._note(f"{exc}; keeping the previous behaviour")
            self._stamp = stamp
            self.last_error = None
            return self._current, None

    def _note(self, message: str) -> str | None:
        if message == self.last_error:
            return None
        self.last_error = message
        return message


@dataclass(frozen=True)
class SpecShape:
    """The speculative parameters the model needs."""

    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    block: bool = False
    """DFLASH / DSPARK: SGLang resolves them to 1 step of top-k 1, and that one step drafts a
    chain of draft_tokens - 1 tokens (the block), so the chain, not the step count, is deep."""


def accept_length(shape: SpecShape, acceptance: float) -> float:
    """Expected accepted tokens per verify pass, bonus token included (>= 1)."""
    a = min(ALPHA_MAX, max(0.0, acceptance))
    if a == 0.0 or shape.num_steps == 0:  # adaptive speculation may pick 0 steps: no drafts
        return 1.0
    if shape.block:
        return 1.0 + sum(a**i for i in range(1, shape.num_draft_tokens))
    depth = min(shape.num_steps, shape.num_draft_tokens - 1)
    width = min(float(shape.eagle_topk), (shape.num_draft_tokens - 1) / shape.num_steps)
    tries = max(1.0, 1.0 + TREE_GAIN * (width - 1.0))
    p = 1.0 - (1.0 - a) ** tries
    return 1.0 + sum(p**i for i in range(1, depth + 1))


def step_seconds(
    shape: SpecShape | None,
    running: int,
    base_tps: float,
    graph: bool,
    throughput_scale: float,
) -> float:
    """Seconds one decode iteration takes for `running` requests (model time)."""
    bs = max(1, running)
    t1 = 1.0 / base_tps

    def target(tokens: int) -> float:
        return t1 * (1.0 + TOKEN_COST * (tokens - 1))

    if shape is None:
        step = target(bs)
    else:
        draft = shape.num_steps * DRAFT_COST * t1 * (1.0 + TOKEN_COST * (bs * shape.eagle_topk - 1))
        step = target(bs * shape.num_draft_tokens) + draft
    if not graph:
        step *= GRAPH_PENALTY
    return step / throughput_scale


def model_throughput(
    shape: SpecShape | None,
    running: int,
    acceptance: float,
    base_tps: float = 90.0,
    graph: bool = True,
    throughput_scale: float = 1.0,
) -> float:
    """Expected gen throughput (tokens/s for all running requests together)."""
    e = 1.0 if shape is None else accept_length(shape, acceptance)
    bs = max(1, running)
    return bs * e / step_seconds(shape, bs, base_tps, graph, throughput_scale)


def load_json_or_none(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`, or None when it is missing or not a JSON object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def verify_cap_split(accepted: int, cap: int | None) -> tuple[int, int]:
    """(commit, cap-trimmed) of a pass that would accept `accepted` tokens (bonus included)
    uncapped, under a verify cap of `cap` tokens (None: no cap, SGLANG_RAGGED_VERIFY_MODE
    static). DSPARK's accept len counts the commit; its block accept len commit + trimmed."""
    if cap is None or accepted <= cap:
        return accepted, 0
    return cap, accepted - cap


@dataclass
class BlockEstimate:
    """The stand-in's DSPARK block-accept estimator: a bracket [lo, hi] of the uncapped accept
    length, averaged over every pass of every request since start (SGLang's printed estimate is
    its cumulative one). A pass whose whole block was verified (static, cap-accept) knows its
    uncapped length: lo = hi = it. In compact mode a pass that stopped at the cap verified only
    that far: lo = the cap, hi = the whole block (every unverified draft might have held)."""

    lo_sum: float = 0.0
    hi_sum: float = 0.0
    blocks: int = 0

    def add(self, lo: float, hi: float) -> None:
        self.lo_sum += lo
        self.hi_sum += hi
        self.blocks += 1

    def bounds(self) -> tuple[float, float] | None:
        """(lo, hi) means, None before the first block (SGLang prints no estimate then)."""
        if self.blocks == 0:
            return None
        return self.lo_sum / self.blocks, self.hi_sum / self.blocks
