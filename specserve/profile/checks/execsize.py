"""The rendered command must fit what exec accepts: one argument or variable at most 128 KiB,
all of them within a quarter of the usual 8 MiB stack limit (specserve/profile/execlimits.py).

Past those the server cannot start at all, and before this check a 200 KB argument passed
`check` and ended the launcher's dry run in an E2BIG traceback. The launcher checks again,
with the environment it really passes and this machine's limits, just before it execs.
"""

from __future__ import annotations

from specserve.profile.execlimits import USUAL, oversizes
from specserve.profile.issues import Issue, error
from specserve.profile.model import Profile
from specserve.profile.nccl import PRESETS
from specserve.profile.nodes import Placement, PlacementError
from specserve.profile.render import render
from specserve.profile.sglang import Contract

# Where the profile leaves rank 0's address to the deploy, a stand-in of a typical length.
_DEPLOY_HOST = "rank-0.example.internal"


def check_exec_size(profile: Profile, contract: Contract) -> list[Issue]:
    if profile.nccl.preset not in PRESETS:  # check_env reports it; nothing renders without it
        return []
    placement = Placement(0, profile.nodes.rendezvous_host or _DEPLOY_HOST)
    try:
        rendered = render(profile, contract.version, placement)
    except PlacementError:  # check_nodes reports the layout
        return []
    found = oversizes(rendered.argv, rendered.env, USUAL, rendered.sources, rendered.env_sources)
    return [error(o.where, o.problem, o.fix) for o in found]
