"""The running-request cap stays within the decode batches SGLang captures as CUDA graphs.

A decode batch above the largest captured size runs eagerly (sglang#33900): nothing fails and
nothing warns, decode just slows down once load passes that size. The field notes measured 56.7
tok/s without CUDA graphs against 74.9 tok/s with them. The captured sizes are SGLang's own
resolution (`specserve/profile/graphsizes.py`, held to SGLang's code by
tests/contract/test_graph_sizes.py); the cap is the one the server runs with
(`variants.effective_max_running_requests`), per attention-DP rank where DP attention splits it
(SGLang sizes each rank's request pool `max_running_requests // attn_dp_size`,
model_executor/pool_configurator.py).

SGLang's default graph size depends on the GPU's memory, which the profile gives only as a floor
(`gpu.min_memory_gib`): every memory band of SGLang's table at or above that floor is checked, and
the smallest capture decides. Uncovered is an error unless `server.allow_uncaptured_decode` says
why (then a warning); where the memory is not stated and only some bands leave batches uncovered,
a warning names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.profile.argview import ArgvView, profile_view
from specserve.profile.checks.graphs import DISABLED, resolve_decode_graph
from specserve.profile.graphsizes import (
    MIB_PER_GIB,
    GraphInputs,
    band_floors_mib,
    config_decode,
    decode_graph_batch_sizes,
)
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile
from specserve.profile.sglang import Contract
from specserve.profile.variants import effective_max_running_requests

ISSUE_REF = "sglang#33900"
OVERRIDE = "server.allow_uncaptured_decode"


def graph_inputs(view: ArgvView, version: str, gpu_memory_mib: float | None) -> GraphInputs:
    """What SGLang's resolution reads from the argv `view` to size the decode graphs."""
    json_max_bs, json_bs = config_decode(view["cuda_graph_config"])
    flag_bs = view["cuda_graph_bs_decode"]
    if json_bs is None and isinstance(flag_bs, list) and flag_bs:
        json_bs = tuple(int(b) for b in flag_bs)
    if json_max_bs is None:
        json_max_bs = _int_or_none(view["cuda_graph_max_bs_decode"])
    return GraphInputs(
        version=version,
        gpu_memory_mib=gpu_memory_mib,
        tp_size=int(view["tp_size"] or 1),
        speculative=view["speculative_algorithm"] is not None,
        max_running_requests=_int_or_none(view["max_running_requests"]),
        max_bs=json_max_bs,
        bs=json_bs,
        disable_padding=bool(view["disable_cuda_graph_padding"]),
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Capture:
    """The largest decode batch captured on a GPU of at least `memory_mib`."""

    memory_mib: float
    largest: int


def captures(view: ArgvView, version: str, min_memory_gib: float) -> list[Capture]:
    """The largest captured batch at the profile's memory floor and each higher band's floor."""
    floor = min_memory_gib * MIB_PER_GIB
    points = [floor, *(b for b in band_floors_mib() if b > floor)]
    return [
        Capture(mib, max(decode_graph_batch_sizes(graph_inputs(view, version, mib))))
        for mib in points
    ]


@dataclass(frozen=True)
class Source:
    """What decided the captured sizes: the profile field, its words, how to raise them."""

    field: str
    words: str
    explicit: bool

    def raise_to(self, size: int) -> str:
        if not self.explicit or self.field == "server.cuda_graph_max_bs":
            return f"raise server.cuda_graph_max_bs to {size}"
        if "bs-decode" in self.words and "max-bs" not in self.words:
            return f"add {size} to {self.words.split()[0]} ({self.field})"
        return f"raise the decode graph's max_bs to {size} ({self.field})"


def _source(view: ArgvView, inputs: GraphInputs) -> Source:
    # The precedence of cuda_graph_hook.py::parse_cuda_graph_config: the JSON, then the flags.
    json_max_bs, json_bs = config_decode(view["cuda_graph_config"])
    if json_bs is not None or json_max_bs is not None:
        dest = "cuda_graph_config"
    elif inputs.bs is not None:
        dest = "cuda_graph_bs_decode"
    elif inputs.max_bs is not None:
        dest = "cuda_graph_max_bs_decode"
    else:
        padding = " without padding" if inputs.disable_padding else ""
        words = f"SGLang's default{padding} for the GPU memory and TP {inputs.tp_size}"
        return Source("server.max_running_requests", words, explicit=False)
    where = view.where(dest)
    if where == "server.cuda_graph_max_bs":
        return Source(where, f"server.cuda_graph_max_bs: {view[dest]}", explicit=True)
    return Source(where, view.words(dest), explicit=True)


def _gib(mib: float) -> str:
    return f"{mib / MIB_PER_GIB:g} GiB"


def check_graph_coverage(profile: Profile, contract: Contract) -> list[Issue]:
    if profile.gpu.count == 0:
        return []  # the CPU stand-in: no CUDA graphs
    state, _ = resolve_decode_graph(profile, contract)
    view = profile_view(profile, contract)
    if state.backend == DISABLED or view is None:
        return []  # graphs.py reports graphs off; others an argv that does not render
    version = contract.version
    memory_known = profile.gpu.min_memory_gib > 0
    found = captures(view, version, profile.gpu.min_memory_gib)
    worst = min(found, key=lambda c: c.largest)
    inputs = graph_inputs(view, version, worst.memory_mib)
    source = _source(view, inputs)
    words = source.words
    reason = profile.server.allow_uncaptured_decode
    cap = effective_max_running_requests(profile, version)
    par = profile.parallelism
    dp = par.dp if par.enable_dp_attention and par.dp > 1 else 1
    if cap is None:
        problem = (
            f"server.max_running_requests is unset and SGLang {version} sets no cap for this "
            "profile: it sizes the running requests from the KV cache at start, and decode "
            f"batches above {worst.largest} (the largest captured as a CUDA graph, {words}) "
            f"run eagerly ({ISSUE_REF})"
        )
        fix = (
            f"set server.max_running_requests to at most {worst.largest * dp}, or raise "
            "server.cuda_graph_max_bs to the cap you expect"
        )
        return [warning("server.max_running_requests", _quoted(problem, reason), fix)]
    per_rank = max(1, cap // dp)
    uncovered = [c for c in found if c.largest < per_rank]
    if not uncovered:
        return []
    cap_words = (
        f"server.max_running_requests {cap}" if profile.server.max_running_requests is not None
        else f"SGLang's cap of {cap} running requests under speculation")  # fmt: skip
    rank_words = f" ({per_rank} per attention-DP rank)" if dp > 1 else ""
    where_words = "" if source.explicit else (
        f" on a GPU of {_gib(worst.memory_mib)}" if worst.memory_mib > 0 else
        " on a GPU under 20 GiB")  # fmt: skip
    problem = (
        f"{cap_words}{rank_words} is above the largest decode batch SGLang {version} captures "
        f"as a CUDA graph{where_words}, {worst.largest} ({words}): decode batches of "
        f"{worst.largest + 1}-{per_rank} requests run eagerly, a silent slowdown under load "
        f"({ISSUE_REF})"
    )
    fix = (
        f"{source.raise_to(per_rank)} or lower server.max_running_requests to "
        f"{worst.largest * dp}; to accept eager decode above it, set {OVERRIDE} to the reason"
    )
    if reason:
        accepted = _quoted(problem, reason)
        return [warning(source.field, accepted, "none needed while the reason holds")]
    if source.explicit or memory_known or len(uncovered) == len(found):
        return [error(source.field, problem, fix)]
    gpus = ", ".join(_gib(c.memory_mib) if c.memory_mib else "under 20 GiB" for c in uncovered)
    return [warning(
        "gpu.min_memory_gib",
        f"{problem}; gpu.min_memory_gib is unset and SGLang's default leaves it uncovered on "
        f"GPUs of {gpus}",
        f"set gpu.min_memory_gib to the GPUs' memory; or {fix}",
    )]  # fmt: skip


def _quoted(problem: str, reason: str | None) -> str:
    return f"{problem}; accepted by {OVERRIDE}: {reason!r}" if reason else problem
