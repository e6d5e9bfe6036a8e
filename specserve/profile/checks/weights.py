"""Weights complete: every shard the safetensors index names is present and plausibly whole.

A 600 GB download interrupted halfway leaves a directory that loads for many minutes and then
fails; checking shard presence and sizes first turns that into one clear error.
"""

from __future__ import annotations

import stat
from pathlib import Path

from specserve.profile.checks.context import ModelContext
from specserve.profile.hfconfig import (
    INDEX_NAME,
    LOOP_FIX,
    ModelDirError,
    is_symlink_loop,
    read_index,
)
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile

# Where no weights belong (a controller checking before the download, the stand-in profile's
# config-only fixtures) `--configs-only` is the right call: both weight errors name it.
CONFIGS_ONLY_FIX = (
    "where no weights belong (a controller before the download, the config-only models of "
    "profiles/standin-cpu.yaml), add --configs-only"
)

# Each shard carries a JSON header on top of its tensor bytes; allow that much over total_size.
HEADER_SLACK = 0.02


def _size(path: Path) -> int | None:
    """Bytes of a regular file behind `path`; None when it is missing, a symlink loop, or not
    a regular file (a shard that is a FIFO or a directory is as good as missing)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _loop_issues(field_name: str, paths: list[Path]) -> list[Issue]:
    loops = [p.name for p in paths if is_symlink_loop(p)]
    if not loops:
        return []
    shown = ", ".join(loops[:5]) + (f" and {len(loops) - 5} more" if len(loops) > 5 else "")
    return [error(field_name, f"weight files that are symlink loops: {shown}", LOOP_FIX)]


def _dir_issues(field_name: str, directory: Path) -> list[Issue]:
    if is_symlink_loop(directory):
        return []  # reported once, by the config check, for the field
    try:
        index = read_index(directory)
    except ModelDirError as exc:
        return [error(field_name, str(exc), exc.fix or "download the index again")]
    if index is None:
        # Single-file checkpoints: one *.safetensors, or pytorch_model.bin (older drafters).
        found = sorted([*directory.glob("*.safetensors"), *directory.glob("*.bin")])
        loop_issues = _loop_issues(field_name, found)
        if loop_issues:
            return loop_issues
        singles = [p for p in found if _size(p) is not None]
        if not singles:
            return [
                error(
                    field_name,
                    f"{directory} has neither {INDEX_NAME} nor any *.safetensors / *.bin file",
                    f"download the weights (`hf download <repo> --local-dir {directory}`); "
                    + CONFIGS_ONLY_FIX,
                )
            ]
        empty = [p.name for p in singles if _size(p) == 0]
        if empty:
            return [
                error(field_name, f"empty weight files: {', '.join(empty)}", "download them again")
            ]
        return []
    shards = sorted({str(s) for s in index["weight_map"].values()})
    sizes = {s: _size(directory / s) for s in shards}
    issues: list[Issue] = _loop_issues(field_name, [directory / s for s in shards])
    missing = [s for s in shards if sizes[s] is None and not is_symlink_loop(directory / s)]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        issues.append(
            error(
                field_name,
                f"{len(missing)} of {len(shards)} shards named in {INDEX_NAME} are missing "
                f"from {directory}: {shown}",
                f"finish the download (`hf download <repo> --local-dir {directory}` resumes "
                "it); " + CONFIGS_ONLY_FIX,
            )
        )
    present = [s for s in shards if sizes[s] is not None]
    empty = [s for s in present if sizes[s] == 0]
    if empty:
        issues.append(
            error(field_name, f"empty shards: {', '.join(empty[:5])}", "download them again")
        )
    total = (index.get("metadata") or {}).get("total_size")
    if not missing and len(present) == len(shards) and isinstance(total, int) and total > 0:
        on_disk = sum(sizes[s] or 0 for s in present)
        if on_disk < total:
            issues.append(
                error(
                    field_name,
                    f"shards hold {on_disk} bytes but the index's total_size is {total}: "
                    "some shard is truncated",
                    "download the weights again and compare checksums",
                )
            )
        elif on_disk > total * (1 + HEADER_SLACK) + 1024 * 1024 * len(shards):
            issues.append(
                warning(
                    field_name,
                    f"shards hold {on_disk} bytes, well above the index's total_size {total}",
                    "check that the shards belong to this index (mixed revisions?)",
                )
            )
    return issues


def check_weights(profile: Profile, ctx: ModelContext) -> list[Issue]:
    issues: list[Issue] = []
    if ctx.target_dir is not None:
        issues += _dir_issues("target.path", ctx.target_dir)
    if ctx.drafter_dir is not None:
        issues += _dir_issues("drafter.path", ctx.drafter_dir)
    return issues
