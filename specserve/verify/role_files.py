"""The verify role's settings of the gate, written from the gate's table (specserve.verify.options)
into the role's defaults and argument specs by `specserve generate`, between marker lines, so the
role never restates a default the command has."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping

import yaml

from specserve.verify.options import FLOOR_ALERT, OPTIONS, Option

DEFAULTS = "ansible/roles/verify/defaults/main.yml"
SPECS = "ansible/roles/verify/meta/argument_specs.yml"
BEGIN = "# BEGIN GENERATED gate options: `specserve generate` from specserve/verify/options.py"
END = "# END GENERATED gate options"
# The role's floor is the alert's unless set: the variable's default says so with null.
FLOOR_VAR = "verify_accept_length_floor"
FLOOR_HELP = (f"Mean accept length over the warm-up's decode lines must exceed this, when the "
              f"profile speculates. Null (the default): the {FLOOR_ALERT} alert's floor, with "
              f"specserve_alert_overrides applied, so the gate and the alert agree.")
_TYPES = {int: "int", float: "float", str: "str", bool: "bool"}


def _rows() -> list[tuple[str, Option, object, str]]:
    """(variable, option, role default, description) for every option the role sets."""
    rows = []
    for option in OPTIONS:
        if option.name == "floor":
            rows.append((FLOOR_VAR, option, None, FLOOR_HELP))
        elif option.role_var:
            help_text = option.help[0].upper() + option.help[1:]
            rows.append((option.role_var, option, option.default, f"{help_text} (specserve "
                                                                   f"verify {option.flag})."))
    return rows


def _dump(mapping: Mapping[str, object], indent: int) -> list[str]:
    text = yaml.safe_dump(dict(mapping), sort_keys=False, width=100, allow_unicode=True)
    return [" " * indent + line if line else line for line in text.splitlines()]


def defaults_block() -> list[str]:
    lines: list[str] = []
    for variable, _option, value, description in _rows():
        lines += [f"# {line}" for line in textwrap.wrap(description, 98)]
        lines += _dump({variable: value}, 0)
    return lines


def specs_block() -> list[str]:
    lines: list[str] = []
    for variable, option, value, description in _rows():
        spec = {"type": _TYPES[option.kind], "default": value, "description": description}
        lines += _dump({variable: spec}, 6)
        if option.choices:  # a flow sequence, as the other roles' specs write theirs
            lines.append(f"{' ' * 8}choices: [{', '.join(option.choices)}]")
    return lines


def splice(text: str, block: list[str], path: str, indent: str = "") -> str:
    """`text` with the lines between its marker lines replaced by `block`."""
    lines = text.splitlines()
    try:
        start = lines.index(indent + BEGIN)
        end = lines.index(indent + END, start)
    except ValueError:
        raise ValueError(f"{path}: the marker lines {BEGIN!r} and {END!r} are missing; put them "
                         f"back where the gate's settings go") from None
    return "\n".join(lines[: start + 1] + block + lines[end:]) + "\n"


def files(read: Callable[[str], str]) -> Mapping[str, Callable[[], str]]:
    """The two role files, each its hand-written text with the generated block renewed."""
    return {
        DEFAULTS: lambda: splice(read(DEFAULTS), defaults_block(), DEFAULTS),
        SPECS: lambda: splice(read(SPECS), specs_block(), SPECS, indent=" " * 6),
    }
