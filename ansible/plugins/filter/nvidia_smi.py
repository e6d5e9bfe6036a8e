"""Parse nvidia-smi's outputs into facts the preflight compares with the profile.

Pure functions, unit-tested against real recorded outputs (tests/ansible/fixtures/nvidia-smi/),
so the roles never scrape text with regexes in Jinja.
"""

from __future__ import annotations

import re
from typing import Any

# `nvidia-smi topo -m` underlines its header with ANSI escapes even when writing to a file.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU_COLUMN = re.compile(r"GPU(\d+)$")
_NVLINK = re.compile(r"NV(\d+)$")
_MIB = re.compile(r"^(\d+(?:\.\d+)?)\s*MiB$")


class NvidiaSmiParseError(ValueError):
    """The text is not what `nvidia-smi` prints for the query the roles run."""


def parse_query_gpu(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader`."""
    gpus: list[dict[str, Any]] = []
    for index, line in enumerate(filter(None, (raw.strip() for raw in text.splitlines()))):
        fields = [field.strip() for field in line.rsplit(",", 2)]
        if len(fields) != 3:
            raise NvidiaSmiParseError(
                f"line {index + 1} {line!r}: expected 'name, memory.total, driver_version'"
            )
        name, memory, driver = fields
        match = _MIB.match(memory)
        if not match:
            raise NvidiaSmiParseError(
                f"line {index + 1}: memory.total {memory!r} is not '<number> MiB' "
                "(query with --format=csv,noheader, without nounits)"
            )
        mib = float(match.group(1))
        gpus.append(
            {
                "index": index,
                "name": name,
                "memory_mib": mib,
                "memory_gib": round(mib / 1024, 2),
                "driver_version": driver,
            }
        )
    return gpus


def parse_topology(text: str) -> dict[str, Any]:
    """`nvidia-smi topo -m`: the GPU-to-GPU link matrix and what it means for NCCL.

    `kind` is `single` (at most one GPU), `nvlink` (every GPU pair joined by NVLink),
    `pcie` (no pair is) or `mixed`.
    """
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header_index = next(
        (i for i, line in enumerate(lines) if any(_GPU_COLUMN.match(c.strip()) for c in
                                                  line.split("\t")) and line.startswith("\t")),
        None,
    )
    if header_index is None:
        raise NvidiaSmiParseError("no header row with GPU columns: is this `nvidia-smi topo -m`?")
    header = [cell.strip() for cell in lines[header_index].split("\t")]
    columns = {i: f"GPU{m.group(1)}" for i, c in enumerate(header) if (m := _GPU_COLUMN.match(c))}
    links: dict[str, dict[str, str]] = {}
    for line in lines[header_index + 1:]:
        cells = line.split("\t")
        row = cells[0].strip()
        if not _GPU_COLUMN.match(row):
            if row:
                continue  # NIC rows
            break  # the blank line before the legend
        links[row] = {
            gpu: cells[i].strip()
            for i, gpu in columns.items()
            if i < len(cells) and gpu != row
        }
    pairs = [link for row in links.values() for link in row.values()]
    nvlink_pairs = sum(1 for link in pairs if _NVLINK.match(link))
    if len(links) <= 1:
        kind = "single"
    elif nvlink_pairs == len(pairs):
        kind = "nvlink"
    elif nvlink_pairs == 0:
        kind = "pcie"
    else:
        kind = "mixed"
    return {"gpu_count": len(links), "links": links, "kind": kind}


def parse_compute_pids(text: str) -> list[int]:
    """`nvidia-smi --query-compute-apps=pid --format=csv,noheader`: PIDs still on a GPU."""
    pids: list[int] = []
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        if not line.isdigit():
            raise NvidiaSmiParseError(f"{line!r} is not a PID")
        pids.append(int(line))
    return pids


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "nvidia_smi_gpus": parse_query_gpu,
            "nvidia_smi_topology": parse_topology,
            "nvidia_smi_compute_pids": parse_compute_pids,
        }
