"""SGLang's `_handle_uno` rules as plain functions, for `check` (checks/uno.py) and the stand-in.

`arg_groups/speculative_hook.py::_handle_uno`, the same in 0.5.21 and 0.5.23 but for how it reads
DP attention. The messages are SGLang's own; tests/contract/test_uno.py holds both users to its
resolution.
"""

from __future__ import annotations

# _handle_uno's limits on a tree (top-k > 1).
MAX_TREE_VERIFY_WIDTH = 128
MAX_TREE_FRONTIER = 2048
FA3 = "fa3"

ONLY_CUDA = "UNO only supports CUDA."
NO_DRAFT_PATH = (
    "UNO reuses the target model and does not accept --speculative-draft-model-path."
)
NEEDS_LORA = "UNO requires --uno-lora-path."
NO_DETERMINISTIC = (
    "UNO does not support --enable-deterministic-inference because its sampling path does not "
    "use per-request seeds."
)
NO_STRICT_THINKING = (
    "UNO does not support --enable-strict-thinking because it requires grammar decoding."
)
NEEDS_Q = (
    "UNO requires --speculative-num-draft-tokens to be a positive integer denoting the linear "
    "width or tree verify width Q."
)
TREE_NEEDS_STEPS = (
    "UNO tree mode requires --speculative-num-steps so its draft width F can be derived as "
    "speculative_num_steps + 1."
)
LINEAR_OVERRIDE = "UNO uses {field}=1; overriding {value}."
ONE_GPU = "UNO requires TP=PP=1."
NO_DP_ATTENTION = "UNO does not support DP attention or context parallelism."
NO_MULTI_LORA = "UNO does not support public Multi-LoRA serving."
NO_REJECTION_SAMPLING = (
    "UNO manages its own stochastic verification and does not use "
    "--speculative-use-rejection-sampling."
)
MIXED_CHUNK_OFF = "Mixed chunked prefill is disabled for UNO speculative decoding."
NEEDS_FA3 = (
    "UNO requires FA3 for both prefill and decode attention; got prefill={prefill!r}, "
    "decode={decode!r}."
)


def tree_refusal(q: int, k: int, steps: int) -> str | None:
    """What SGLang says of a tree (top-k `k` > 1) of `steps` steps verifying `q` tokens, in
    _handle_uno's order; None where it builds."""
    f = steps + 1
    capacity, level = 1, 1
    for _ in range(steps):
        level *= k
        capacity += level
        if capacity >= q:
            break
    parent = k * max(steps - 1, 0) + 1
    refusals = [
        (q < f, f"UNO tree mode requires Q >= F; got Q={q}, F={f}."),
        (q > MAX_TREE_VERIFY_WIDTH,
         f"UNO tree mode currently supports at most Q=128 verify nodes, got Q={q}."),
        (q * k > MAX_TREE_FRONTIER,
         f"UNO tree mode currently supports Q*K <= 2048; got Q*K={q}*{k}={q * k}."),
        (q > capacity, "UNO tree mode cannot build the requested Q from F and K: "
         f"Q={q} exceeds capacity={capacity} for F={f}, K={k}."),
        (q - 1 > parent, "UNO tree mode cannot represent the requested Q in EAGLE's "
         f"parent-list ABI: Q-1={q - 1} exceeds K*(F-2)+1={parent} for F={f}, K={k}."),
    ]  # fmt: skip
    return next((said for holds, said in refusals if holds), None)
