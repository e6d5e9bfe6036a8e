"""What the parent learns about the node before starting workers: devices, backend, topology.

The parent never imports torch. In the specserve image it runs from specserve's own virtual
environment, which has no PyTorch; the workers must use the SGLang interpreter that does. So the
parent picks an interpreter with torch and asks it, in a subprocess, what it sees.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

# `nvidia-smi topo -m` marks NVLink-connected GPU pairs NV<n> (e.g. NV18); PCIe paths are
# PIX/PXB/PHB/NODE/SYS. The legend below the matrix mentions "NV#", so only matrix cells count.
_GPU_NAME = re.compile(r"^GPU\d+$")
_NVLINK_CELL = re.compile(r"^NV\d+$")


class MachineError(RuntimeError):
    """The node cannot run the requested benchmark; the message says what to change."""


@dataclass(frozen=True)
class Plan:
    device: str  # cuda | cpu
    backend: str  # nccl | gloo
    world_size: int
    topology: str  # pcie | nvlink | any
    topology_note: str
    python: str  # the interpreter the workers run with
    torch_version: str


_PROBE = (
    "import json, torch\n"
    "cuda = torch.cuda.is_available()\n"
    "print(json.dumps({'torch_version': torch.__version__, 'cuda_available': cuda,\n"
    "                  'device_count': torch.cuda.device_count() if cuda else 0}))\n"
)
PROBE_TIMEOUT_S = 180.0


def default_python() -> str:
    """This interpreter if it has torch, else `python3` on PATH (SGLang's, inside its image)."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return shutil.which("python3") or shutil.which("python") or sys.executable


def probe_torch(python: str) -> dict[str, Any]:
    """torch version and CUDA devices as `python` sees them; MachineError if it has no torch."""
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MachineError(f"--python {python}: could not run it: {exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise MachineError(
            f"--python {python}: cannot import torch ({last}); point --python at the "
            "interpreter that has PyTorch (inside the SGLang image: python3)"
        )
    info: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return info


def gpu_links(topo_matrix: str) -> list[str]:
    """The GPU-to-GPU cells of an `nvidia-smi topo -m` matrix (self cells excluded)."""
    header: list[str] | None = None
    cells: list[str] = []
    for line in topo_matrix.splitlines():
        tokens = line.split()
        if header is None:
            if tokens and _GPU_NAME.match(tokens[0]) and tokens[0] == "GPU0":
                header = [t for t in tokens if _GPU_NAME.match(t)]
            continue
        if not tokens or not _GPU_NAME.match(tokens[0]):
            continue
        row = tokens[1 : 1 + len(header)]
        cells += [cell for cell in row if cell != "X"]
    return cells


def detect_topology(topo_matrix: str | None) -> tuple[str, str]:
    """(topology, how it was decided) from `nvidia-smi topo -m` output (None: not available).

    `nvlink` only when every GPU pair is NVLink-connected: LL128 and NVLS are unsafe over any
    PCIe hop, so a partly-NVLink node is validated as `pcie`.
    """
    if topo_matrix is None:
        return "any", "nvidia-smi not available: topology unknown, validated as 'any'"
    links = gpu_links(topo_matrix)
    if not links:
        return "any", "nvidia-smi topo -m shows fewer than 2 GPUs: validated as 'any'"
    nvlink = [cell for cell in links if _NVLINK_CELL.match(cell)]
    if len(nvlink) == len(links):
        return "nvlink", "nvidia-smi topo -m: every GPU pair is NV#-linked"
    if nvlink:
        return "pcie", "nvidia-smi topo -m: only some GPU pairs are NV#-linked, validated as pcie"
    return "pcie", "nvidia-smi topo -m: no NV# link, GPUs talk over PCIe / host"


def nvidia_smi_topology() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "topo", "-m"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def plan(
    device: str,
    backend: str,
    world_size: int | None,
    topology: str,
    python: str,
    torch_info: dict[str, Any],
) -> Plan:
    """Resolve the auto choices; refuse combinations that cannot work, saying why."""
    gpus = int(torch_info["device_count"]) if device in ("auto", "cuda") else 0
    if device == "auto":
        device = "cuda" if gpus > 0 else "cpu"
    if device == "cuda" and gpus == 0:
        raise MachineError(
            f"--device cuda: PyTorch {torch_info['torch_version']} ({python}) sees no CUDA GPU; "
            "run inside the SGLang image with "
            "`docker run --gpus all`, or use --device cpu for a gloo smoke test"
        )
    if backend == "auto":
        backend = "nccl" if device == "cuda" else "gloo"
    if backend == "nccl" and device != "cuda":
        raise MachineError("--backend nccl needs --device cuda: NCCL only reduces GPU tensors")
    if world_size is None:
        world_size = gpus if device == "cuda" else 2
    if world_size < 2:
        raise MachineError(
            f"--world-size {world_size}: an all-reduce needs at least 2 ranks"
            + (f" (PyTorch sees {gpus} GPU)" if device == "cuda" else "")
        )
    if device == "cuda" and world_size > gpus:
        raise MachineError(
            f"--world-size {world_size} is more than the {gpus} GPUs PyTorch sees "
            "(check CUDA_VISIBLE_DEVICES and `docker run --gpus all`)"
        )
    if topology == "auto":
        if device == "cuda":
            topology, note = detect_topology(nvidia_smi_topology())
        else:
            topology, note = "any", "CPU run (gloo): no GPU interconnect, validated as 'any'"
    else:
        note = "declared with --topology"
    return Plan(
        device, backend, world_size, topology, note, python, str(torch_info["torch_version"])
    )
