"""A speculative profile is judged only against a baseline measured under its own settings.

The comparison is the profile library's (specserve/profile/likeness.py), shared with the
exporter. A recorded setting that differs is an error naming it (recorded vs. profile value) and
the fix; a baseline that records nothing (written by hand, or by a baseline.yml older than the
recording) is a warning: it may well be right, but nothing proves it, and refusing it would stop
every deployment that has one until it is re-measured.
"""

from __future__ import annotations

from specserve.profile.issues import Issue, error, warning
from specserve.profile.likeness import FIX, compare, refusal, unrecorded_notice
from specserve.profile.model import Profile

FIELD = "baseline"


def check_baseline(
    profile: Profile, image: str | None = None, sglang_version: str | None = None
) -> list[Issue]:
    comparison = compare(profile, image, sglang_version)
    if not comparison.applies:
        return []
    issues: list[Issue] = []
    if comparison.differences:
        issues.append(error(FIELD, refusal(comparison), FIX))
    if comparison.unrecorded:
        issues.append(warning(FIELD, unrecorded_notice(comparison), FIX))
    return issues
