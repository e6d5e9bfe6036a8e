"""UNO: SGLang's drafting with a LoRA on the target itself, held to `_handle_uno`.

`arg_groups/speculative_hook.py::_handle_uno` (the same in 0.5.21 and 0.5.23 but for how it reads
DP attention) refuses at start, in the words quoted here, what the profile could otherwise
write: a drafter path, no LoRA, no verify width Q (`num_draft_tokens`), TP or PP above 1, DP
attention or context parallelism, public multi-LoRA serving, rejection sampling, deterministic
inference, strict thinking, an attention backend other than FA3 for prefill or decode, and a
tree (top-k above 1) its sizes cannot build. What it changes with only a log warning (a step count
other than 1 in linear mode, mixed chunked prefill) is an error here, quoting that warning.
It applies no running-request cap (unlike every other algorithm). tests/contract/test_uno.py
resolves every case with SGLang's own code.
"""

from __future__ import annotations

from specserve.profile.argview import ArgvView, profile_view
from specserve.profile.issues import Issue, error
from specserve.profile.model import Drafter, Profile
from specserve.profile.sglang import Contract

# _handle_uno's limits on a tree (top-k > 1).
MAX_TREE_VERIFY_WIDTH = 128
MAX_TREE_FRONTIER = 2048
FA3 = "fa3"


def uno_issues(profile: Profile, contract: Contract) -> list[Issue]:
    d = profile.drafter
    assert d is not None and d.algorithm == "UNO"
    version = contract.version
    issues: list[Issue] = []
    if profile.gpu.count == 0:
        issues.append(error(
            "drafter.algorithm",
            f"UNO only supports CUDA (SGLang {version}); this profile runs without a GPU (the "
            "CPU stand-in, which does not simulate UNO)",
            "deploy UNO on a CUDA node (gpu.count above 0), or pick an algorithm the stand-in "
            "simulates",
        ))  # fmt: skip
    if d.path:
        issues.append(error(
            "drafter.path",
            "UNO reuses the target model and does not accept --speculative-draft-model-path "
            f"(SGLang {version} refuses to start)",
            "remove drafter.path: UNO's drafter is drafter.uno_lora_path, a LoRA on the target",
        ))  # fmt: skip
    if not d.uno_lora_path:
        issues.append(error(
            "drafter.uno_lora_path",
            f"UNO requires --uno-lora-path (SGLang {version} refuses to start without it)",
            "set drafter.uno_lora_path to the UNO draft LoRA checkpoint",
        ))  # fmt: skip
    issues += _tree_issues(d, version)
    view = profile_view(profile, contract)
    if view is not None:
        issues += _server_issues(view, version)
    return issues


def _tree_issues(d: Drafter, version: str) -> list[Issue]:
    """The verify width Q and, with top-k above 1, the tree _handle_uno can build."""
    q, k, steps = d.num_draft_tokens, d.eagle_topk or 1, d.num_steps
    if q is None:
        return [error(
            "drafter.num_draft_tokens",
            "UNO requires --speculative-num-draft-tokens to be a positive integer denoting the "
            f"linear width or tree verify width Q (SGLang {version} refuses to start)",
            "set drafter.num_draft_tokens (e.g. 4)",
        )]  # fmt: skip
    if k == 1:
        if steps not in (None, 1):
            return [error(
                "drafter.num_steps",
                f"{steps} with UNO at top-k 1: SGLang {version} overrides it, logging only "
                f"'UNO uses speculative_num_steps=1; overriding {steps}.'",
                "remove drafter.num_steps (UNO's linear mode drafts num_draft_tokens at once)",
            )]  # fmt: skip
        return []
    if steps is None:
        return [error(
            "drafter.num_steps",
            "UNO tree mode requires --speculative-num-steps so its draft width F can be derived "
            f"as speculative_num_steps + 1 (SGLang {version} refuses to start)",
            "set drafter.num_steps, or eagle_topk: 1 for UNO's linear mode",
        )]  # fmt: skip
    f = steps + 1
    capacity, level = 1, 1
    for _ in range(steps):
        level *= k
        capacity += level
        if capacity >= q:
            break
    parent = k * max(steps - 1, 0) + 1
    # In _handle_uno's order: the first that holds is what SGLang says.
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
    refusal = next((said for holds, said in refusals if holds), None)
    if refusal is None:
        return []
    return [error(
        "drafter.num_draft_tokens",
        f"{refusal} (SGLang {version} refuses to start; Q is num_draft_tokens, F num_steps + 1, "
        "K eagle_topk)",
        "pick num_steps, eagle_topk and num_draft_tokens that build the tree, or eagle_topk: 1",
    )]  # fmt: skip


def _server_issues(view: ArgvView, version: str) -> list[Issue]:
    """What _handle_uno refuses (or silently changes) in the rest of the argv."""
    out: list[Issue] = []

    def refuse(dest: str, said: str, fix: str) -> None:
        out.append(error(view.where(dest), f"{said} ({view.words(dest)}; SGLang {version} "
                         "refuses to start)", fix))  # fmt: skip

    if view["tp_size"] != 1 or view["pp_size"] != 1:
        dest = "tp_size" if view["tp_size"] != 1 else "pp_size"
        refuse(dest, "UNO requires TP=PP=1.", "serve UNO on one GPU (parallelism.tp: 1, no "
               "--pp-size)")  # fmt: skip
    dp_attention = bool(view["enable_dp_attention"]) or (
        view.known("attn_dp_size") and (view["attn_dp_size"] or 1) > 1)  # fmt: skip
    if dp_attention or view["attn_cp_size"] != 1:
        dest = "attn_cp_size" if view["attn_cp_size"] != 1 else (
            "enable_dp_attention" if view["enable_dp_attention"] else "attn_dp_size")  # fmt: skip
        refuse(dest, "UNO does not support DP attention or context parallelism.",
               "turn DP attention and context parallelism off")  # fmt: skip
    for dest in ("enable_lora", "lora_paths"):
        if view[dest]:
            refuse(dest, "UNO does not support public Multi-LoRA serving.",
                   f"remove {view.flag(dest)}")  # fmt: skip
    for dest, said in (
        ("speculative_use_rejection_sampling", "UNO manages its own stochastic verification "
         "and does not use --speculative-use-rejection-sampling."),
        ("enable_deterministic_inference", "UNO does not support "
         "--enable-deterministic-inference because its sampling path does not use per-request "
         "seeds."),
        ("enable_strict_thinking", "UNO does not support --enable-strict-thinking because it "
         "requires grammar decoding."),
    ):  # fmt: skip
        if view.known(dest) and view[dest]:
            refuse(dest, said, f"remove {view.flag(dest)}")
    if view["enable_mixed_chunk"]:
        out.append(error(
            view.where("enable_mixed_chunk"),
            f"--enable-mixed-chunk with UNO: SGLang {version} turns it off, logging only "
            "'Mixed chunked prefill is disabled for UNO speculative decoding.'",
            "remove --enable-mixed-chunk",
        ))  # fmt: skip
    prefill = view["prefill_attention_backend"] or view["attention_backend"]
    decode = view["decode_attention_backend"] or view["attention_backend"]
    if (prefill, decode) != (FA3, FA3):
        out.append(error(
            "server.extra_args",
            "UNO requires FA3 for both prefill and decode attention (SGLang "
            f"{version} refuses to start otherwise); the argv names prefill={prefill!r}, "
            f"decode={decode!r}, and where it names none SGLang picks the GPU's default",
            "add --attention-backend fa3 to server.extra_args (FA3 needs a Hopper GPU)",
        ))  # fmt: skip
    return out


def stray_uno_lora(d: Drafter) -> list[Issue]:
    """drafter.uno_lora_path with another algorithm: only UNO reads --uno-lora-path."""
    if d.algorithm == "UNO" or not d.uno_lora_path:
        return []
    return [error(
        "drafter.uno_lora_path",
        f"set with {d.algorithm}: only SGLang's UNO reads --uno-lora-path, so it would be "
        "ignored",
        "remove drafter.uno_lora_path, or set drafter.algorithm: UNO",
    )]  # fmt: skip
