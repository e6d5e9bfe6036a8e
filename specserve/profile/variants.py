"""Profile variants that must stay like for like with the profile they come from.

The baseline (the same profile with the drafter removed, `playbooks/baseline.yml`) is the
throughput the speculative server is judged against. SGLang caps running requests at 48 when
speculation is on and `--max-running-requests` is unset (speculative_hook.py), and applies no such
cap without speculation, so a baseline rendered from the bare profile would admit more concurrent
requests than the speculative run it is compared with. The baseline therefore pins the value the
speculative server actually runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specserve.profile.algorithms import document_speculates
from specserve.profile.model import Profile, canonical_algorithm
from specserve.profile.sglang import resolve_version, sglang_contract, speculative_running_cap


def speculative_max_running_requests(
    doc: Mapping[str, Any], sglang_version: str | None = None
) -> int | None:
    """max_running_requests the speculative server of profile document `doc` runs with: the
    profile's own value, else SGLang's cap for its algorithm; None when speculation is off."""
    server = doc.get("server") or {}
    explicit = server.get("max_running_requests")
    drafter = doc.get("drafter") or {}
    algorithm = drafter.get("algorithm")
    if not document_speculates(doc):
        return None
    if isinstance(explicit, int) and not isinstance(explicit, bool):
        return explicit
    contract = sglang_contract(resolve_version(sglang_version))
    return speculative_running_cap(contract, canonical_algorithm(algorithm))


def effective_max_running_requests(
    profile: Profile, sglang_version: str | None = None
) -> int | None:
    """The running-request cap the server of `profile` runs with: its own value, else SGLang's
    cap under speculation, else None (no cap: SGLang sizes it from memory)."""
    explicit = profile.server.max_running_requests
    if explicit is not None or profile.speculative is None:
        return explicit
    return speculative_max_running_requests(_document(profile), sglang_version)


def _document(profile: Profile) -> Mapping[str, Any]:
    """The profile as written; a Profile built without one (tests) speaks for itself."""
    if profile.document:
        return profile.document
    spec = profile.speculative
    return {"drafter": {"algorithm": spec.algorithm} if spec else None, "server": {}}
