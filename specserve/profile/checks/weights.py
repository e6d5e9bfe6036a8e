"""Weights complete: every shard the safetensors index names is present and plausibly whole.

A 600 GB download interrupted halfway leaves a directory that loads for many minutes and then
fails; checking shard presence and sizes first turns that into one clear error.
"""

from __future__ import annotations

from pathlib import Path

from specserve.profile.checks.context import ModelContext
from specserve.profile.hfconfig import INDEX_NAME, ModelDirError, read_index
from specserve.profile.issues import Issue, error, warning
from specserve.profile.model import Profile

# Each shard carries a JSON header on top of its tensor bytes; allow that much over total_size.
HEADER_SLACK = 0.02


def _dir_issues(field_name: str, directory: Path) -> list[Issue]:
    try:
        index = read_index(directory)
    except ModelDirError as exc:
        return [error(field_name, str(exc), "download the index again")]
    if index is None:
        # Single-file checkpoints: one *.safetensors, or pytorch_model.bin (older drafters).
        singles = sorted([*directory.glob("*.safetensors"), *directory.glob("*.bin")])
        if not singles:
            return [
                error(
                    field_name,
                    f"{directory} has neither {INDEX_NAME} nor any *.safetensors / *.bin file",
                    "download the weights, or use --configs-only for a config-only directory",
                )
            ]
        empty = [p.name for p in singles if p.stat().st_size == 0]
        if empty:
            return [
                error(field_name, f"empty weight files: {', '.join(empty)}", "download them again")
            ]
        return []
    shards = sorted(set(index["weight_map"].values()))
    issues: list[Issue] = []
    missing = [s for s in shards if not (directory / s).is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        issues.append(
            error(
                field_name,
                f"{len(missing)} of {len(shards)} shards named in {INDEX_NAME} are missing "
                f"from {directory}: {shown}",
                "finish the download (e.g. huggingface-cli download resumes), or use "
                "--configs-only to check configs alone",
            )
        )
    present = [directory / s for s in shards if (directory / s).is_file()]
    empty = [p.name for p in present if p.stat().st_size == 0]
    if empty:
        issues.append(
            error(field_name, f"empty shards: {', '.join(empty[:5])}", "download them again")
        )
    total = (index.get("metadata") or {}).get("total_size")
    if not missing and isinstance(total, int) and total > 0:
        on_disk = sum(p.stat().st_size for p in present)
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
