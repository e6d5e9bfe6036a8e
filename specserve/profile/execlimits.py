"""What execve(2) refuses with E2BIG ("Argument list too long"), found before anything starts.

Linux copies argv and the environment onto the new program's stack (fs/exec.c) and refuses:
- any one string over MAX_ARG_STRLEN, 32 pages with its NUL (128 KiB with the 4 KiB pages of
  x86-64 and most arm64 kernels), whatever the stack limit;
- all the strings, NULs included, plus one pointer each, over a quarter of the stack's soft
  limit (RLIMIT_STACK), capped at 6 MiB and never under 32 pages: 2 MiB with the usual 8 MiB.
Past either, the server's exec (or the dry run's parser exec) failed: a Python traceback in
the dry run, "cannot exec" naming nothing in the launcher. `specserve check` judges the
rendered argv and environment against the usual limits; the launcher judges what it is about
to exec, inherited environment included, against this machine's.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_STK_LIM = 8 * 1024 * 1024  # the kernel's default stack limit; exec caps argv at 3/4 of it / 4
_POINTER = 8  # bytes per argv / envp pointer on a 64-bit kernel
_PATH_MAX = 4096  # exec copies the program's path too; at most this long


@dataclass(frozen=True)
class ExecLimits:
    per_string: int  # bytes of one argument or NAME=VALUE, NUL included
    total: int  # bytes of every string with its NUL, plus one pointer each
    basis: str  # where `total` comes from, for the refusal


def limits_for(page: int, stack_soft: int, basis: str) -> ExecLimits:
    share = _STK_LIM // 4 * 3
    if stack_soft != resource.RLIM_INFINITY:
        share = min(share, stack_soft // 4)
    return ExecLimits(32 * page, max(share, 32 * page), basis)


USUAL = limits_for(4096, _STK_LIM, "a quarter of the usual 8 MiB stack limit")


def this_process() -> ExecLimits:
    """The limits an exec from this process meets (its page size, its stack soft limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    stack = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft // 1024:,} KiB"
    return limits_for(
        os.sysconf("SC_PAGESIZE"), soft, f"this machine's, from its {stack} stack limit"
    )


@dataclass(frozen=True)
class Oversize:
    where: str
    problem: str
    fix: str

    def line(self) -> str:
        return f"{self.where}: {self.problem}. Fix: {self.fix}"


def _size(text: str) -> int:
    """Bytes exec copies for `text`, its NUL included (os.fsencode's encoding)."""
    return (len(text) if text.isascii() else len(os.fsencode(text))) + 1


def oversizes(
    argv: Sequence[str],
    env: Mapping[str, str],
    limits: ExecLimits,
    sources: Sequence[str] = (),
    env_sources: Mapping[str, str] | None = None,
) -> list[Oversize]:
    """Everything about argv + env that exec would refuse: each string over the per-string
    limit, then the whole over the total; empty when it fits.

    `sources[i]` names where argv[i] comes from (a profile field), `env_sources[NAME]` where a
    variable does; one without a source is named by its position or as inherited."""
    env_sources = env_sources or {}
    sizes: list[tuple[int, str]] = []
    for i, arg in enumerate(argv):
        where = sources[i] if i < len(sources) else f"argument {i} of the command"
        if i and not arg.startswith("-") and argv[i - 1].startswith("--"):
            where += f" (the value of {argv[i - 1][:60]})"
        sizes.append((_size(arg), where))
    for name, value in env.items():
        where = env_sources.get(name, f"environment variable {name}")
        sizes.append((_size(f"{name}={value}"), where))
    found = [
        Oversize(
            where,
            f"is {size - 1:,} bytes, over the kernel's {limits.per_string - 1:,}-byte limit "
            "for one argument or variable (MAX_ARG_STRLEN); exec would fail with "
            "'Argument list too long'",
            "pass bulk content as a file the server reads (SGLang's file options take a "
            "path), not as the value itself",
        )
        for size, where in sizes
        if size > limits.per_string
    ]
    total = sum(size for size, _ in sizes) + _POINTER * (len(sizes) + 2) + _PATH_MAX
    if total > limits.total:
        size, where = max(sizes, key=lambda item: item[0])
        found.append(
            Oversize(
                "(command)",
                f"argv and environment are {total:,} bytes together ({len(argv):,} arguments, "
                f"{len(env):,} variables), over the kernel's {limits.total:,}-byte limit "
                f"({limits.basis}); the largest is {where} ({size - 1:,} bytes)",
                "shorten server.extra_args or the environment (bulk content belongs in a file), "
                "or raise the stack limit the server starts under (ulimit -s)",
            )
        )
    return found
