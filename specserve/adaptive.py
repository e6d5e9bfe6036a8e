"""SGLang's adaptive speculative decoding (`--speculative-adaptive`), as 0.5.21 and 0.5.23 run it.

Read from SGLang's own code (identical in both verified versions unless said otherwise; the
contract tests in tests/contract/test_adaptive.py run that code and compare):
- `arg_groups/speculative_hook.py` `_maybe_disable_adaptive`: resolution turns adaptive off,
  with a warning and no error, unless the algorithm is EAGLE / EAGLE3 with top-k 1 (or unset)
  and neither DP attention, multi-layer EAGLE, two-batch overlap nor PD multiplexing is on
  (`speculative/adaptive_spec_params.py` `adaptive_unsupported_reason`; 0.5.23 words the DP
  attention reason differently and also refuses platform-specific workers, none on CUDA).
- `_init_adaptive_speculative_params`: top-k unset -> 1; steps unset -> the middle of the
  candidate steps (the union over the config's batch-size slots); steps not a candidate -> a
  ValueError at start; draft tokens = steps + 1.
- `AdaptiveStepSlot` / `AdaptiveSpeculativeParams`: per batch-size slot, an EMA of accepted
  drafts per request moves the steps between candidates; `eagle_worker_v2.apply_runtime_state`
  logs each switch. Steps may reach 0: the server then verifies one token per pass and the
  accept length is 1.00 by design, not because drafts are rejected.

The stand-in runs this policy (`StepPolicy`); `specserve check` uses the resolution rules; the
exporter reads the switch line (`SWITCH_PATTERN`).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALGORITHMS: tuple[str, ...] = ("EAGLE", "EAGLE3")
# adaptive_spec_params.DEFAULT_ADAPTIVE_CONFIG: batch size (as a string) -> slot settings.
DEFAULT_CONFIG: dict[str, dict[str, Any]] = {
    "1": {
        "candidate_steps": [1, 3, 5, 7],
        "up_hysteresis": 0.0,
        "down_hysteresis": -0.25,
        "ceiling_coeff": 0,
    },
    "8": {
        "candidate_steps": [0, 1, 3],
        "up_hysteresis": 0.0,
        "down_hysteresis": 0.0,
        "ceiling_coeff": 0,
    },
    "32": {
        "candidate_steps": [0, 1],
        "up_hysteresis": 0.0,
        "down_hysteresis": 0.0,
        "ceiling_coeff": 0,
    },
    "64": {
        "candidate_steps": [0],
        "up_hysteresis": 0.0,
        "down_hysteresis": 0.0,
        "ceiling_coeff": 0,
    },
}

# The lines SGLang logs (verbatim formats; tests/contract/test_adaptive.py renders them with
# SGLang's code). Only rank 0 logs them (log_info_on_rank0).
DISABLED_WARNING = (
    "speculative_adaptive disabled: {reason}. Falling back to static speculative params."
)
INIT_LINE = "AdaptiveSpeculativeParams initialized: steps={steps}, candidate_steps={candidates}"
UPDATED_LINE = "Adaptive spec params updated: steps {old} -> {new} (ema_accept_len={ema:.2f})"
SWITCH_LINE = (
    "Switch adaptive runtime state: steps {old_steps} -> {steps}, "
    "draft_tokens {old_draft_tokens} -> {draft_tokens}"
)
SWITCH_MARKER = b"Switch adaptive runtime state: "
INIT_MARKER = b"AdaptiveSpeculativeParams initialized: "
SWITCH_PATTERN = re.compile(
    rb"Switch adaptive runtime state: steps (\d+) -> (\d+), draft_tokens (\d+) -> (\d+)$",
    re.MULTILINE,
)


class AdaptiveConfigError(ValueError):
    """The adaptive config file is one SGLang refuses at start."""


@dataclass(frozen=True)
class ServerFlags:
    """What `adaptive_unsupported_reason` reads besides the algorithm and top-k."""

    dp_attention: bool = False
    multi_layer_eagle: bool = False
    two_batch_overlap: bool = False
    pdmux: bool = False


def unsupported_reason(
    algorithm: str | None, topk: int | None, flags: ServerFlags, version: str
) -> str | None:
    """Why SGLang `version` turns adaptive off for these settings (its own words), or None."""
    if algorithm not in ALGORITHMS:
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if flags.dp_attention:
        if version == "0.5.21":
            return (
                "enable_dp_attention=True is not supported "
                "(adaptive tier decisions are not synchronized across DP ranks)"
            )
        return (
            "attention DP is not supported "
            "(adaptive tier decisions are not synchronized across DP ranks)"
        )
    if flags.multi_layer_eagle:
        return (
            "enable_multi_layer_eagle=True is not supported "
            "(MultiLayerEagleWorkerV2 does not implement adaptive)"
        )
    if flags.two_batch_overlap:
        return (
            "enable_two_batch_overlap=True is not supported "
            "(adaptive state swap would discard the TboAttnBackend wrapper)"
        )
    if flags.pdmux:
        return (
            "enable_pdmux=True is not supported "
            "(adaptive state swap does not update decode_attn_backend_group)"
        )
    return None


def load_config(path: str | Path | None) -> dict[int, dict[str, Any]]:
    """Batch size -> slot settings (top-level keys merged under each slot's), as
    `_load_adaptive_config` reads the file; None: the built-in table."""
    if path is None:
        doc: Any = DEFAULT_CONFIG
    else:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise AdaptiveConfigError(f"cannot read {path}: {exc.strerror}") from exc
        except ValueError as exc:
            raise AdaptiveConfigError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise AdaptiveConfigError(f"{path}: the config must be a JSON object of batch sizes")
    shared = {k: v for k, v in doc.items() if not str(k).isdigit()}
    slots: dict[int, dict[str, Any]] = {}
    for key, entry in doc.items():
        if not str(key).isdigit():
            continue
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
        if (
            not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
        ):
            raise AdaptiveConfigError(
                f"batch size {key}: candidate_steps must be a list of non-negative ints, "
                f"got {steps!r}"
            )
        slots[int(key)] = {**shared, **entry}
    if not slots:
        raise AdaptiveConfigError(
            "the config must contain at least one integer-string batch-size key, e.g. "
            f'{{"1": {{"candidate_steps": [1, 3, 7]}}}}; got keys {list(doc)}'
        )
    return slots


def candidate_steps(slots: dict[int, dict[str, Any]]) -> list[int]:
    """The union of every slot's candidate steps (`resolve_candidate_steps_from_config`)."""
    return sorted({s for entry in slots.values() for s in entry["candidate_steps"]})


def start_steps(steps: int | None, candidates: list[int]) -> int:
    """The steps the server starts with (`_init_adaptive_speculative_params`); ValueError with
    SGLang's message when the given steps are not a candidate."""
    if steps is None:
        steps = candidates[len(candidates) // 2]
    if steps not in candidates:
        raise ValueError(
            f"--speculative-num-steps={steps} is not in the adaptive config candidate_steps "
            f"{candidates}. Pass one of those values."
        )
    return steps


class StepSlot:
    """`AdaptiveStepSlot`: an EMA of accepted drafts per request decides the steps."""

    def __init__(self, initial_steps: int, cfg: dict[str, Any]) -> None:
        self.candidate_steps = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = float(cfg.get("ema_alpha", 0.2))
        self.update_interval = int(cfg.get("update_interval", 5))
        self.warmup_batches = int(cfg.get("warmup_batches", 10))
        self.down_hysteresis = float(cfg.get("down_hysteresis", -0.25))
        self.up_hysteresis = float(cfg.get("up_hysteresis", 0.0))
        self.ceiling_coeff = float(cfg.get("ceiling_coeff", 0))
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0
        self.last_update: tuple[int, int, float] | None = None  # (old, new, ema) of a change

    def update(self, correct_drafts_per_req: list[int]) -> bool:
        if not correct_drafts_per_req:
            return False
        if self.current_steps > 0:
            batch_avg = sum(correct_drafts_per_req) / len(correct_drafts_per_req)
            self.ema_accept_len = (
                1 - self.ema_alpha
            ) * self.ema_accept_len + self.ema_alpha * batch_avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        old_idx = idx
        if old == 0:
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        while idx > 0:
            prev = self.candidate_steps[idx - 1]
            drop = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if self.ema_accept_len <= drop:
                idx -= 1
            else:
                break
        if not idx < old_idx:
            while idx < len(self.candidate_steps) - 1:
                rise = self.candidate_steps[idx] - 0.5 + self.up_hysteresis
                if self.ema_accept_len > rise:
                    idx += 1
                else:
                    break
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if target > ceiling and target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        return self._apply(old, target)

    def _apply(self, old: int, target: int) -> bool:
        if target == old:
            return False
        self.current_steps = target
        self.last_update = (old, target, self.ema_accept_len)
        return True


class StepPolicy:
    """`AdaptiveSpeculativeParams` without CUDA-graph batch padding: a batch goes to the slot of
    the largest configured batch size not above it (the smallest slot below all of them)."""

    def __init__(self, initial_steps: int, slots: dict[int, dict[str, Any]]) -> None:
        self._sizes = sorted(slots)
        self._slots = {bs: StepSlot(initial_steps, slots[bs]) for bs in self._sizes}

    def slot(self, batch_size: int) -> StepSlot:
        idx = bisect.bisect_right(self._sizes, batch_size) - 1
        return self._slots[self._sizes[max(0, idx)]]

    def steps_for_batch(self, batch_size: int) -> int:
        return self.slot(batch_size).current_steps

    def on_verify_complete(self, correct_drafts_per_req: list[int], batch_size: int) -> int | None:
        """The new steps when the batch's slot switches, else None."""
        slot = self.slot(batch_size)
        return slot.current_steps if slot.update(correct_drafts_per_req) else None
