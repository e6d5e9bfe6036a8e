"""tuning.methods: each alternative drafter block is held to the checks its own profile would be.

playbooks/tune.yml swaps each block in for `drafter` and deploys it; a block `check` would refuse
there (a DSPARK without its drafter, an EAGLE3 head under NGRAM) could only be reported as an
invalid candidate at tuning time. Checked here, it is refused where the profile is written, in the
words of the check that refuses it, under the method's own field.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from specserve.profile.issues import Issue, Severity
from specserve.profile.model import Profile, profile_from_document

# The sections an alternative changes: the rest of the profile is the drafter's own, checked
# already.
_OWN = ("drafter",)


def check_tuning_methods(
    profile: Profile, run: Callable[[Profile], list[Issue]]
) -> list[Issue]:
    """`run` checks one profile (run_checks with the caller's options)."""
    methods: list[Any] = profile.document_value("tuning.methods") or []
    issues: list[Issue] = []
    for index, method in enumerate(methods):
        doc = copy.deepcopy(profile.document)
        doc["drafter"] = copy.deepcopy(method)
        doc.pop("tuning", None)  # the alternative's own profile names no alternatives
        alternative = profile_from_document(doc, source_path=profile.source_path)
        where = f"tuning.methods[{index}] ({str(method.get('algorithm', '?')).upper()})"
        for issue in run(alternative):
            if issue.severity is Severity.ERROR and issue.field.startswith(_OWN):
                issues.append(Issue(issue.severity, f"{where} {issue.field}", issue.problem,
                                    issue.fix))  # fmt: skip
    return issues
