"""Whether the profile's baseline may be published: like for like with the speculative profile.

The baseline gauges are the alert threshold, so publishing one measured under other settings
(another running-request cap, TP, image...) would make the alert compare unlike things. The
comparison is the profile library's (specserve.profile.likeness), the one `specserve check` uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.profile.likeness import FIX, compare, refusal, unrecorded_notice
from specserve.profile.model import Profile


@dataclass(frozen=True)
class Verdict:
    refusal: str | None = None  # the exporter must not start: the message, fix included
    warning: str | None = None  # it starts, and says this on stderr


def judge(profile: Profile, server_image: str | None) -> Verdict:
    """The SGLang version is not compared: the exporter does not know which one the server
    runs (`specserve check` does)."""
    comparison = compare(profile, image=server_image)
    if not comparison.applies:
        return Verdict()
    if comparison.differences:
        return Verdict(refusal=f"{refusal(comparison)}. Fix: {FIX}")
    if comparison.unrecorded:
        return Verdict(warning=f"{unrecorded_notice(comparison)}. Fix: {FIX}")
    return Verdict()
