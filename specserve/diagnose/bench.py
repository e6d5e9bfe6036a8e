"""What a `specserve bench` result says about acceptance that one fleet mean hides.

Two findings, each per concurrency level of the result (the bench's acceptance section, from
SGLang's per-request speculative details):
- a prompt class whose median accept length is below the break-even floor (the
  SpecDecodeAcceptLengthLow alert's, at the deployment's threshold) while the level's median is
  not: that traffic pays for drafts it rarely keeps;
- draft positions that survive in fewer than USEFUL_SURVIVAL of the verify passes: the drafter
  proposes tokens that are almost never kept, and a shorter draft would cost less.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from specserve.profile.issues import Issue, warning

# A draft position kept in fewer than this share of verify passes is not worth drafting.
USEFUL_SURVIVAL = 0.1


def _useless_from(survival: list[float]) -> int | None:
    """The first 1-based draft position kept in fewer than USEFUL_SURVIVAL of the passes."""
    for position, share in enumerate(survival, 1):
        if share < USEFUL_SURVIVAL:
            return position
    return None


def bench_findings(result: Mapping[str, Any], floor: float) -> Iterator[Issue]:
    for level in result["levels"]:
        acceptance = level.get("acceptance")
        if not acceptance:
            continue
        concurrency = level["concurrency"]
        overall = acceptance["accept_length"]["p50"]
        for kind, section in sorted(acceptance["by_kind"].items()):
            median = section["accept_length"]["p50"]
            if median is not None and overall is not None and median < floor <= overall:
                yield warning(
                    f"bench: concurrency {concurrency}, class {kind}",
                    f"median accept length {median:.2f} ({section['accept_length']['n']} "
                    f"requests), below the floor {floor:g} while the level's median is "
                    f"{overall:.2f}: one mean hides this class",
                    "route this class without speculation, or use a drafter trained on it",
                )
        survival = list(acceptance["position_survival"])
        first = _useless_from(survival)
        if first is not None:
            kept = ", ".join(f"{share:.0%}" for share in survival[first - 1:])
            yield warning(
                f"bench: concurrency {concurrency}, draft positions {first}-{len(survival)}",
                f"kept in {kept} of {acceptance['verify_passes']} verify passes (under "
                f"{USEFUL_SURVIVAL:.0%}): drafted past the useful position",
                f"draft at most {first - 1} token(s) past the verified one (with topk 1: "
                f"num_steps {max(first - 1, 1)}, num_draft_tokens {max(first, 2)}); "
                "measure the point with `specserve tune`",
            )
