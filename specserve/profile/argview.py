"""The rendered argv read back as SGLang's parser would: option dest -> value, per version.

The start-time refusals (checks/startup.py) and the decode-graph switch-offs (checks/graphs.py)
are conditions on SGLang's parsed arguments: `--enable-mis` without `--attention-backend
flashinfer`, `--moe-a2a-backend deepep` with `--deepep-mode normal`, speculation with
`--weight-cache-mode`. The profile sets some of those words (the drafter's flags, tp, the KV
cache dtype) and `extra_args` the rest, so both are read from the one argv `render` writes, with
the target version's option table (`specserve.upstream`): dests, defaults, value types, and
argparse's rule that the last occurrence of a flag wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specserve.profile.model import Profile
from specserve.profile.nccl import PRESETS
from specserve.profile.nodes import Placement, PlacementError
from specserve.profile.render import render
from specserve.profile.sglang import Contract
from specserve.upstream import Option

# Where the profile leaves rank 0's address to the deploy: any host renders the same flags.
_DEPLOY_HOST = "rank-0.example.internal"
_INTEGER_TYPES = ("int", "human_readable_int")


def _convert(option: Option, word: str) -> Any:
    """`word` as argparse's `type=` turns it into a value; unconvertible words stay strings
    (`check` reports a bad choice, SGLang's own parser in the dry run a bad int)."""
    try:
        if option.type_name in _INTEGER_TYPES:
            return int(word)
        if option.type_name == "float":
            return float(word)
    except ValueError:
        return word
    return word


@dataclass(frozen=True)
class ArgvView:
    """SGLang's parsed arguments for one argv: `view["attention_backend"]` is the value written
    last, else the option's default; `where(dest)` names the profile field that wrote it."""

    contract: Contract
    values: dict[str, Any] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)  # dest -> the flag as written
    sources: dict[str, str] = field(default_factory=dict)  # dest -> profile field of the flag
    _defaults: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, dest: str) -> Any:
        if dest in self.values:
            return self.values[dest]
        return self._defaults.get(dest)

    def given(self, dest: str) -> bool:
        return dest in self.values

    def known(self, dest: str) -> bool:
        """Whether this SGLang version has the option at all."""
        return dest in self._defaults

    def flag(self, dest: str) -> str:
        """The flag as the argv writes it, else the option's own spelling."""
        if dest in self.spelled:
            return self.spelled[dest]
        option = next((o for o in self.contract.options if o.dest == dest), None)
        return option.flags[0] if option is not None else "--" + dest.replace("_", "-")

    def where(self, dest: str) -> str:
        return self.sources.get(dest, "server.extra_args")

    def words(self, dest: str) -> str:
        """`--flag value` (or `--flag`) as the argv writes it, for messages."""
        value = self[dest]
        if isinstance(value, bool) or value is None:
            return self.flag(dest)
        if isinstance(value, list):
            return " ".join([self.flag(dest), *map(str, value)])
        return f"{self.flag(dest)} {value}"


def attention_backend(view: ArgvView) -> object:
    """The attention backend SGLang resolves from the argv (overrides.py::
    _attention_backend_default): the split backend where prefill and decode name the same one,
    else --attention-backend; None where the GPU's default decides."""
    prefill = view["prefill_attention_backend"]
    if prefill is not None and prefill == view["decode_attention_backend"]:
        return prefill
    return view["attention_backend"]


def parse_view(
    argv: Sequence[str], contract: Contract, sources: Sequence[str] | None = None
) -> ArgvView:
    """Read `argv` (flags only, or with the launch command first: words before the first flag
    are skipped) with `contract`'s option table. Unknown flags are skipped (server.py reports
    them)."""
    defaults = {o.dest: o.default for o in contract.options}
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    where: dict[str, str] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        source = sources[i] if sources is not None and i < len(sources) else "server.extra_args"
        i += 1
        if not word.startswith("--"):
            continue
        flag, has_inline, inline = word.partition("=")
        option = contract.option(flag)
        if option is None:
            continue
        value: Any
        if not option.takes_value:
            if option.action == "boolean_optional":
                value = not flag.startswith("--no-")
            else:
                value = option.action != "store_false"
        elif has_inline:
            value = _convert(option, inline)
        elif option.nargs in ("+", "*"):
            items = []
            while i < len(argv) and not argv[i].startswith("--"):
                items.append(_convert(option, argv[i]))
                i += 1
            value = items
        elif i < len(argv) and not argv[i].startswith("--"):
            value = _convert(option, argv[i])
            i += 1
        elif option.nargs == "?":
            value = option.default
        else:
            continue  # a flag without its value: server.py says so
        values[option.dest] = value
        spelled[option.dest] = flag
        where[option.dest] = source
    return ArgvView(contract, values, spelled, where, defaults)


def profile_view(profile: Profile, contract: Contract) -> ArgvView | None:
    """The view of the argv `render` writes for `profile` on `contract.version`; None where
    nothing renders (an unknown NCCL preset, a multi-node layout that does not fit: other
    checks report those)."""
    if profile.nccl.preset not in PRESETS:
        return None
    placement = Placement(0, profile.nodes.rendezvous_host or _DEPLOY_HOST)
    try:
        rendered = render(profile, contract.version, placement)
    except PlacementError:
        return None
    return parse_view(rendered.argv, contract, rendered.sources)
