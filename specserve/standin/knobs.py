"""Stand-in-only settings, read from SPECSERVE_STANDIN_* environment variables.

They are environment variables, not flags, so the stand-in's flag surface stays exactly
SGLang's and a profile's rendered argv starts either server unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specserve.upstream import PINNED_VERSION, VERIFIED_VERSIONS

PREFIX = "SPECSERVE_STANDIN_"


def sglang_env_bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """One of SGLang's own boolean switches (SGLANG_*), parsed as sglang.srt.environ.EnvBool
    parses it: true/1/yes/y, false/0/no/n (any case), else its error, in its words."""
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.lower()
    if value in ("true", "1", "yes", "y"):
        return True
    if value in ("false", "0", "no", "n"):
        return False
    raise ValueError(f'"{value}" is not a valid boolean value')


class KnobError(ValueError):
    """A SPECSERVE_STANDIN_* variable holds a value the stand-in cannot use."""


@dataclass(frozen=True)
class Knobs:
    load_seconds: float = 2.0
    """Seconds before the port is bound (weights "loading": connections are refused)."""
    warmup_seconds: float = 1.0
    """Seconds after binding during which /health and /health_generate answer 503."""
    behaviour_file: Path | None = None
    """YAML/JSON behaviour file, re-read whenever its mtime or size changes."""
    crash_after_seconds: float | None = None
    """Exit non-zero this many seconds after start (rollback tests); None = never."""
    crash_exit_code: int = 1
    time_scale: float = 1.0
    """Wall-clock multiplier for every simulated delay (0.1 = ten times faster; numbers
    printed in the logs are unaffected, they come from the model)."""
    base_tps: float = 90.0
    """Single-request decode speed without speculation, cuda graph on (tokens/s)."""
    sglang_version: str = PINNED_VERSION
    """The SGLang version whose option table, defaults and behaviour the stand-in mimics."""
    verify_cap: int | None = None
    """DSPARK under SGLANG_RAGGED_VERIFY_MODE cap-accept / compact: the tokens (bonus included)
    each request's verify pass may commit; None = the whole block, what SGLang's verify budget
    degenerates to without a profiled SPS table ("verify-all")."""
    loop_when: tuple[tuple[str, str], ...] | None = None
    """SPECSERVE_STANDIN_LOOP_WHEN: `dest=value,...` over the resolved server arguments (e.g.
    `speculative_num_steps=3,speculative_num_draft_tokens=4`), or `always`: a server whose
    arguments all match writes looping output that its drafter predicts almost perfectly, the
    degenerate point a benchmark must not reward (issue 31 item 3). None = never."""

    def loops(self, resolved: Mapping[str, object]) -> bool:
        """Whether a server with these resolved arguments writes looping output."""
        if self.loop_when is None:
            return False
        return all(str(resolved.get(key)) == value for key, value in self.loop_when)


def sglang_version(env: Mapping[str, str] | None = None) -> str:
    """SPECSERVE_STANDIN_SGLANG_VERSION, default the pinned version; must be a verified one."""
    env = os.environ if env is None else env
    raw = env.get(PREFIX + "SGLANG_VERSION") or PINNED_VERSION
    if raw not in VERIFIED_VERSIONS:
        raise KnobError(
            f"{PREFIX}SGLANG_VERSION={raw!r} has no SGLang contract data; use one of "
            f"{', '.join(VERIFIED_VERSIONS)}"
        )
    return raw


def _float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(PREFIX + name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise KnobError(f"{PREFIX}{name}={raw!r} is not a number") from None
    if value < minimum:
        raise KnobError(f"{PREFIX}{name}={raw!r} must be >= {minimum}")
    return value


def _loop_when(raw: str) -> tuple[tuple[str, str], ...] | None:
    if not raw.strip():
        return None
    if raw.strip() == "always":
        return ()
    pairs: list[tuple[str, str]] = []
    for item in raw.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key.strip() or not value.strip():
            raise KnobError(
                f"{PREFIX}LOOP_WHEN={raw!r}: each entry must be dest=value (a resolved server "
                "argument, e.g. speculative_num_steps=3), or the whole value 'always'"
            )
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def load_knobs(env: Mapping[str, str] | None = None) -> Knobs:
    env = os.environ if env is None else env
    crash_raw = env.get(PREFIX + "CRASH_AFTER_SECONDS")
    crash = None if not crash_raw else _float(env, "CRASH_AFTER_SECONDS", 0.0, 0.0)
    code = int(_float(env, "CRASH_EXIT_CODE", 1, 1))
    if code > 255:
        raise KnobError(f"{PREFIX}CRASH_EXIT_CODE={code} must be 1..255")
    behaviour = env.get(PREFIX + "BEHAVIOUR_FILE")
    time_scale = _float(env, "TIME_SCALE", 1.0, 0.0)
    if time_scale == 0:
        raise KnobError(f"{PREFIX}TIME_SCALE must be > 0")
    base_tps = _float(env, "BASE_TPS", 90.0, 0.001)
    cap_raw = env.get(PREFIX + "VERIFY_CAP")
    if cap_raw and not cap_raw.isdigit():
        raise KnobError(f"{PREFIX}VERIFY_CAP={cap_raw!r} must be a whole number of tokens >= 1")
    verify_cap = int(cap_raw) if cap_raw else None
    if verify_cap is not None and verify_cap < 1:
        raise KnobError(f"{PREFIX}VERIFY_CAP={cap_raw!r} must be >= 1 (the bonus token)")
    return Knobs(
        loop_when=_loop_when(env.get(PREFIX + "LOOP_WHEN") or ""),
        load_seconds=_float(env, "LOAD_SECONDS", 2.0, 0.0),
        warmup_seconds=_float(env, "WARMUP_SECONDS", 1.0, 0.0),
        behaviour_file=Path(behaviour) if behaviour else None,
        crash_after_seconds=crash,
        crash_exit_code=code,
        time_scale=time_scale,
        base_tps=base_tps,
        sglang_version=sglang_version(env),
        verify_cap=verify_cap,
    )
