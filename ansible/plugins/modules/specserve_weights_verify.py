"""Ansible module: is a model directory complete? (read-only)

Complete means: config.json present; every shard named in model.safetensors.index.json present
(or, without an index, at least one *.safetensors file); every shard exactly as long as its own
safetensors header says (a truncated transfer is caught even without an index); the shards
together at least the index's total_size; and, when given, every listed SHA-256 matching.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: specserve_weights_verify
short_description: Verify that a staged model directory is complete (read-only)
options:
  path: {description: Model directory on the host., type: path, required: true}
  checksums:
    description: Optional map of file name (relative to path) to SHA-256 hex digest.
    type: dict
    default: {}
"""

RETURN = r"""
complete: {description: whether every check passed, type: bool, returned: always}
problems: {description: what is missing or wrong, one line each, type: list, returned: always}
files: {description: number of weight files checked, type: int, returned: always}
size_bytes: {description: total bytes of the weight files, type: int, returned: always}
"""

INDEX = "model.safetensors.index.json"


def safetensors_expected_size(path: Path) -> int | None:
    """File size the safetensors header implies, or None when the header is unreadable."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(8)
            if len(raw) != 8:
                return None
            (header_len,) = struct.unpack("<Q", raw)
            if header_len > 100 * 1024 * 1024:
                return None
            header = json.loads(handle.read(header_len))
    except (OSError, ValueError):
        return None
    ends = [
        entry["data_offsets"][1]
        for key, entry in header.items()
        if key != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry
    ]
    return 8 + header_len + max(ends, default=0)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(16 * 1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(root: Path, checksums: dict[str, str]) -> dict[str, Any]:
    problems: list[str] = []
    if not (root / "config.json").is_file():
        problems.append(f"{root}/config.json is missing")
    index_path = root / INDEX
    total_size = 0
    if index_path.is_file():
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
            shards = sorted(set(index["weight_map"].values()))
            total_size = int((index.get("metadata") or {}).get("total_size") or 0)
        except (ValueError, KeyError, TypeError) as exc:
            return {"complete": False, "problems": [f"{index_path} is unreadable: {exc}"],
                    "files": 0, "size_bytes": 0}
    else:
        shards = sorted(p.name for p in root.glob("*.safetensors"))
        if not shards:
            problems.append(f"{root} has no {INDEX} and no *.safetensors file")
    size = 0
    missing = [s for s in shards if not (root / s).is_file()]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        problems.append(
            f"{len(missing)} of {len(shards)} shards missing: {', '.join(missing[:5])}{more}"
        )
    for shard in shards:
        path = root / shard
        if not path.is_file():
            continue
        actual = path.stat().st_size
        size += actual
        expected = safetensors_expected_size(path)
        if expected is None:
            problems.append(f"{shard}: safetensors header unreadable (truncated?)")
        elif expected != actual:
            problems.append(f"{shard}: {actual} bytes but its header describes {expected}")
    if total_size and not missing and size < total_size:
        problems.append(f"shards hold {size} bytes, less than the index's total_size {total_size}")
    for name, want in sorted(checksums.items()):
        path = root / name
        if not path.is_file():
            problems.append(f"{name}: listed in checksums but missing")
        elif _sha256(path) != str(want).lower():
            problems.append(f"{name}: SHA-256 does not match")
    return {"complete": not problems, "problems": problems, "files": len(shards),
            "size_bytes": size}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "checksums": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    root = Path(module.params["path"])
    if not root.is_dir():
        module.exit_json(changed=False, complete=False, problems=[f"{root} does not exist"],
                         files=0, size_bytes=0)
    module.exit_json(changed=False, **verify(root, module.params["checksums"]))


if __name__ == "__main__":
    main()
