"""The speculative algorithms a profile takes, and whether a drafter.algorithm value speculates.

The bottom of the profile library: it imports nothing, so the field table, the model, the
schema and every check take these from one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def speculates(algorithm: object) -> bool:
    """Whether a drafter.algorithm value (any case, as written or canonical) turns speculation
    on: every algorithm but `none`; no value (no drafter) means no speculation."""
    return isinstance(algorithm, str) and algorithm.lower() != NO_SPECULATION


def document_speculates(doc: Mapping[str, Any]) -> bool:
    """`speculates` for a profile document as written (before the schema or the model)."""
    drafter = doc.get("drafter")
    return isinstance(drafter, Mapping) and speculates(drafter.get("algorithm"))
