"""UNO: SGLang's drafting with a LoRA on the target itself, held to `_handle_uno`.

`_handle_uno` (specserve/profile/uno.py has its rules and words) refuses at start what the profile
could otherwise write: a drafter path, no LoRA, no verify width Q (`num_draft_tokens`), TP or PP
above 1, DP attention or context parallelism, public multi-LoRA serving, rejection sampling,
deterministic inference, strict thinking, an attention backend other than FA3 for prefill or
decode, and a tree (top-k above 1) its sizes cannot build. What it changes with only a log
warning (a step count other than 1 in linear mode, mixed chunked prefill) is an error here,
quoting that warning. It applies no running-request cap (unlike every other algorithm).
tests/contract/test_uno.py resolves every case with SGLang's own code.
"""

from __future__ import annotations

from specserve.profile import uno
from specserve.profile.argview import ArgvView, profile_view
from specserve.profile.issues import Issue, error
from specserve.profile.model import Drafter, Profile
from specserve.profile.sglang import Contract


def uno_issues(profile: Profile, contract: Contract) -> list[Issue]:
    d = profile.drafter
    assert d is not None and d.algorithm == "UNO"
    version = contract.version
    issues: list[Issue] = []
    if d.path:
        issues.append(error(
            "drafter.path",
            f"{uno.NO_DRAFT_PATH} (SGLang {version} refuses to start)",
            "remove drafter.path: UNO's drafter is drafter.uno_lora_path, a LoRA on the target",
        ))  # fmt: skip
    if not d.uno_lora_path:
        issues.append(error(
            "drafter.uno_lora_path",
            f"{uno.NEEDS_LORA} (SGLang {version} refuses to start without it)",
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
        return [error("drafter.num_draft_tokens", f"{uno.NEEDS_Q} (SGLang {version} refuses to "
                      "start)", "set drafter.num_draft_tokens (e.g. 4)")]  # fmt: skip
    if k == 1:
        if steps not in (None, 1):
            said = uno.LINEAR_OVERRIDE.format(field="speculative_num_steps", value=steps)
            return [error(
                "drafter.num_steps",
                f"{steps} with UNO at top-k 1: SGLang {version} overrides it, logging only "
                f"'{said}'",
                "remove drafter.num_steps (UNO's linear mode drafts num_draft_tokens at once)",
            )]  # fmt: skip
        return []
    if steps is None:
        return [error("drafter.num_steps", f"{uno.TREE_NEEDS_STEPS} (SGLang {version} refuses "
                      "to start)", "set drafter.num_steps, or eagle_topk: 1 for UNO's linear "
                      "mode")]  # fmt: skip
    refusal = uno.tree_refusal(q, k, steps)
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
        refuse(dest, uno.ONE_GPU, "serve UNO on one GPU (parallelism.tp: 1, no --pp-size)")
    dp_attention = bool(view["enable_dp_attention"]) or (
        view.known("attn_dp_size") and (view["attn_dp_size"] or 1) > 1)  # fmt: skip
    if dp_attention or view["attn_cp_size"] != 1:
        dest = "attn_cp_size" if view["attn_cp_size"] != 1 else (
            "enable_dp_attention" if view["enable_dp_attention"] else "attn_dp_size")  # fmt: skip
        refuse(dest, uno.NO_DP_ATTENTION, "turn DP attention and context parallelism off")
    for dest in ("enable_lora", "lora_paths"):
        if view[dest]:
            refuse(dest, uno.NO_MULTI_LORA, f"remove {view.flag(dest)}")
    for dest, said in (
        ("speculative_use_rejection_sampling", uno.NO_REJECTION_SAMPLING),
        ("enable_deterministic_inference", uno.NO_DETERMINISTIC),
        ("enable_strict_thinking", uno.NO_STRICT_THINKING),
    ):
        if view.known(dest) and view[dest]:
            refuse(dest, said, f"remove {view.flag(dest)}")
    if view["enable_mixed_chunk"]:
        out.append(error(
            view.where("enable_mixed_chunk"),
            f"--enable-mixed-chunk with UNO: SGLang {version} turns it off, logging only "
            f"'{uno.MIXED_CHUNK_OFF}'",
            "remove --enable-mixed-chunk",
        ))  # fmt: skip
    prefill = view["prefill_attention_backend"] or view["attention_backend"]
    decode = view["decode_attention_backend"] or view["attention_backend"]
    if (prefill, decode) != (uno.FA3, uno.FA3):
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
