"""Where one rank of a multi-node server sits: the deploy's half of SGLang's distributed flags.

The profile says how many nodes and which rendezvous port (the `nodes` block); the deploy says
which rank a process is and, where only it knows, rank 0's address (Helm: the LeaderWorkerSet's
LWS_WORKER_INDEX / LWS_LEADER_ADDRESS; Ansible: the group's inventory). Kept out of the profile
file so one file serves every rank and a rank can never be copied to the wrong node.

What the ranks do is SGLang's (0.5.21 and 0.5.23, `entrypoints/engine.py` and `http_server.py`):
rank 0 runs the tokenizer and the HTTP API; a rank > 0 joins rank 0's rendezvous, runs only its
schedulers and, once they are ready, a dummy health server on the same host:port (`/ping`,
`/health`, `/health_generate` always 200, `/metrics` with --enable-metrics). So the gate and the
probes that mean "can generate" belong to rank 0 only.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from specserve.profile.model import Profile

NNODES_FLAG = "--nnodes"
NODE_RANK_FLAG = "--node-rank"
DIST_INIT_ADDR_FLAG = "--dist-init-addr"


class PlacementError(ValueError):
    """A rank or rendezvous address that does not fit the profile; the message names the fix."""


@dataclass(frozen=True)
class Placement:
    """One rank: its index and, when the profile leaves it to the deploy, rank 0's address."""

    rank: int = 0
    rendezvous_host: str | None = None


SINGLE = Placement()


def _host_port(host: str, port: int) -> str:
    # SGLang's NetworkAddress.parse takes "[v6]:port" for IPv6 and "host:port" otherwise.
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def rendezvous_address(profile: Profile, placement: Placement) -> str:
    """HOST:PORT of rank 0's rendezvous for a multi-node profile (PlacementError if unknown)."""
    host = placement.rendezvous_host or profile.nodes.rendezvous_host
    if not host:
        raise PlacementError(
            f"nodes.rendezvous_host: profile {profile.name} spans {profile.nodes.count} nodes "
            "but no rendezvous address is known. Fix: set nodes.rendezvous_host to rank 0's "
            "address, or pass it from the deploy (--rendezvous-host)"
        )
    return _host_port(host, profile.nodes.rendezvous_port)


def node_words(profile: Profile, placement: Placement) -> list[str]:
    """SGLang's distributed flags for one rank; none for a single-node profile (rank must be 0)."""
    count = profile.nodes.count
    if not 0 <= placement.rank < count:
        raise PlacementError(
            f"node rank {placement.rank}: profile {profile.name} has nodes.count {count}, so "
            f"ranks are 0..{count - 1}. Fix: pass a rank in that range (--node-rank)"
        )
    if count == 1:
        return []
    return [
        NNODES_FLAG,
        str(count),
        NODE_RANK_FLAG,
        str(placement.rank),
        DIST_INIT_ADDR_FLAG,
        rendezvous_address(profile, placement),
    ]


def serves_api(placement: Placement) -> bool:
    """Whether this rank serves SGLang's API (and so is the one to gate and probe)."""
    return placement.rank == 0


def placement_options(parser: argparse.ArgumentParser) -> None:
    """--node-rank / --rendezvous-host: which rank of a multi-node profile (the deploy's)."""
    parser.add_argument(
        "--node-rank",
        type=int,
        default=0,
        metavar="N",
        help="rank of this node in a multi-node profile (nodes.count > 1), 0..count-1; rank 0 "
        "serves the API (default 0)",
    )
    parser.add_argument(
        "--rendezvous-host",
        default=None,
        metavar="HOST",
        help="rank 0's address, where nodes.rendezvous_host leaves it to the deploy",
    )
