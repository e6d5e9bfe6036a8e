"""SGLang launch_server flags the profile owns, with the profile field that sets each.

Derived from the field table (specserve/profile/fields.py): each row's options, every spelling
SGLang's parser registers for them (`tests/profile/test_profile_sglang.py` holds this to
`specserve.upstream`'s option tables, per version). `extra_args` may not repeat any of these: a
second, hand-written value would silently win or lose depending on argparse order.
"""

from __future__ import annotations

from specserve.profile.fields import (
    BY_PATH,
    DECODE_GRAPH_BACKEND_FLAG,
    FIELDS,
    PREFILL_GRAPH_BACKEND_FLAG,
)

__all__ = [
    "DECODE_GRAPH_BACKEND_FLAG",
    "DISABLE_DECODE_GRAPH_FLAG",
    "GRAPH_CONFIG_FLAG",
    "GRAPH_FLAGS",
    "OWNED_DESTS",
    "OWNED_FLAGS",
    "PREFILL_GRAPH_BACKEND_FLAG",
    "RENDERED_UNOWNED",
    "arg_value",
    "flag_name",
    "flag_spelling",
]

# SGLang's option dest -> the profile field that sets it.
OWNED_DESTS: dict[str, str] = {o.dest: f.path for f in FIELDS for o in f.owns}
# Every spelling of an owned option (aliases included) -> the profile field that sets it.
OWNED_FLAGS: dict[str, str] = {s: f.path for f in FIELDS for o in f.owns for s in o.spellings}
# Flags the renderer writes without owning them (server.disable_cuda_graph's replacement).
RENDERED_UNOWNED: frozenset[str] = frozenset(s for f in FIELDS for s in f.renders_unowned)

# Not owned (a user may pick a graph backend or batch sizes by hand), but each can turn decode
# CUDA graphs off, so checks/graphs.py reads them; the renderer emits the first two when
# server.disable_cuda_graph is allowed.
DISABLE_DECODE_GRAPH_FLAG = "--disable-decode-cuda-graph"
GRAPH_CONFIG_FLAG = "--cuda-graph-config"
GRAPH_FLAGS: frozenset[str] = frozenset(
    {
        DECODE_GRAPH_BACKEND_FLAG,
        PREFILL_GRAPH_BACKEND_FLAG,
        DISABLE_DECODE_GRAPH_FLAG,
        GRAPH_CONFIG_FLAG,
        BY_PATH["server.disable_cuda_graph"].flag,
    }
)


def flag_spelling(arg: str) -> str | None:
    """`--foo-bar=1` -> `--foo-bar`, exactly as written; None for values (not starting --)."""
    if not arg.startswith("--"):
        return None
    return arg.split("=", 1)[0]


def flag_name(arg: str) -> str | None:
    """`--foo_bar=1` -> `--foo-bar`; None for values (anything not starting with --)."""
    spelled = flag_spelling(arg)
    return None if spelled is None else "--" + spelled[2:].replace("_", "-")


def arg_value(args: tuple[str, ...], i: int) -> str | None:
    """The value written for the flag at args[i]: after `=`, else the next word not a flag."""
    arg = args[i]
    if "=" in arg:
        return arg.split("=", 1)[1]
    if i + 1 < len(args) and not args[i + 1].startswith("--"):
        return args[i + 1]
    return None
