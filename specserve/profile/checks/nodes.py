"""A server over several nodes: the GPUs must add up and SGLang must accept the layout.

SGLang's own asserts (arg_groups/validation_hook.py, 0.5.21 and 0.5.23) that a multi-node
layout must pass, checked here so they fail at `specserve check` rather than on every node after
the weights started loading: `(tp_size * pp_size) % nnodes == 0` and no dp > 1 across nodes
without DP attention (tests/contract/test_multinode_argv.py holds the two to SGLang's own
`check_server_args`). The GPU sum is the product's: each node gives `gpu.count` GPUs, and the
parallelism takes `gpus_needed` (checks/parallelism.py's rule) in all.
"""

from __future__ import annotations

from specserve.profile.endpoints import WILDCARD_HOSTS
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile


def _layout(profile: Profile) -> str:
    par = profile.parallelism
    return "tp" if par.enable_dp_attention or par.dp == 1 else "tp x dp"


def _gpu_sum(profile: Profile) -> list[Issue]:
    nodes, gpu, par = profile.nodes, profile.gpu, profile.parallelism
    if gpu.count == 0:  # the CPU stand-in: one tensor-parallel rank per node
        if par.tp == nodes.count:
            return []
        return [
            error(
                "parallelism.tp",
                f"gpu.count is 0 (CPU stand-in) over nodes.count {nodes.count} nodes but tp is "
                f"{par.tp}; the stand-in runs one rank per node",
                f"set tp: {nodes.count}",
            )
        ]
    total = nodes.count * gpu.count
    if total == par.gpus_needed:
        return []
    how = _layout(profile)
    fixes = [f"{how}: {total} (the GPUs the nodes give)"]
    if par.gpus_needed % nodes.count == 0:
        fixes.insert(0, f"gpu.count: {par.gpus_needed // nodes.count} per node")
    return [
        error(
            "nodes.count",
            f"nodes.count x gpu.count = {nodes.count} x {gpu.count} = {total} GPUs but {how} = "
            f"{par.gpus_needed} GPUs",
            "make them equal: " + ", or ".join(fixes),
        )
    ]


def check_nodes(profile: Profile) -> list[Issue]:
    nodes, par = profile.nodes, profile.parallelism
    if nodes.count == 1:
        if nodes.rendezvous_host is not None:
            return [
                warning(
                    "nodes.rendezvous_host",
                    "set, but nodes.count is 1: a single-node server renders no rendezvous",
                    "remove it, or set nodes.count to the number of nodes",
                )
            ]
        return []
    issues = _gpu_sum(profile)
    if par.tp % nodes.count:
        issues.append(
            error(
                "parallelism.tp",
                f"tp {par.tp} does not divide over nodes.count {nodes.count} nodes; SGLang "
                'asserts tp_size % nnodes == 0 ("tp_size must be divisible by number of '
                'nodes")',
                f"make tp a multiple of {nodes.count}",
            )
        )
    if par.dp > 1 and not par.enable_dp_attention:
        issues.append(
            error(
                "parallelism.dp",
                f"dp {par.dp} across {nodes.count} nodes without DP attention; SGLang refuses "
                "multi-node data-parallel replicas (only DP attention spans nodes)",
                "set parallelism.enable_dp_attention: true, or dp: 1 (or deploy the replicas "
                "as separate single-node servers behind the router)",
            )
        )
    host = nodes.rendezvous_host
    if host is not None and host in WILDCARD_HOSTS:
        issues.append(
            error(
                "nodes.rendezvous_host",
                f"{host!r} is a bind-all address; the other ranks must connect to rank 0",
                "set rank 0's address, or leave it null for the deploy to supply",
            )
        )
    if nodes.rendezvous_port == profile.server.port:
        issues.append(
            error(
                "nodes.rendezvous_port",
                f"{nodes.rendezvous_port} is also server.port; rank 0 binds both",
                "choose another port (the default is 25000)",
            )
        )
    return issues
