# ruff: noqa: E501  (the nvidia-smi legend is quoted verbatim)
import sys

import pytest

from specserve.nccl.machine import (
    MachineError,
    default_python,
    detect_topology,
    gpu_links,
    plan,
    probe_torch,
)

# The legend as nvidia-smi prints it: it says "NV#", which must not count as a link.
LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

# Layout of `nvidia-smi topo -m` (tab-separated, " X " on the diagonal, NIC rows/columns after
# the GPUs), as printed by current drivers.
NVSWITCH = (
    "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tNV18\tPXB\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tSYS\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\tSYS\t X \t\t\t\t\n" + LEGEND + "\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)
PCIE = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNODE\tSYS\tSYS\t0-127,256-383\t0\t\tN/A\n"
    "GPU1\tNODE\t X \tSYS\tSYS\t0-127,256-383\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tNODE\t128-255,384-511\t1\t\tN/A\n"
    "GPU3\tSYS\tSYS\tNODE\t X \t128-255,384-511\t1\t\tN/A\n" + LEGEND
)
PAIRS = (
    "        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity\n"
    "GPU0     X      NV4     SYS     SYS     0,2,4,6,8,10    0\n"
    "GPU1    NV4      X      SYS     SYS     0,2,4,6,8,10    0\n"
    "GPU2    SYS     SYS      X      NV4     1,3,5,7,9,11    1\n"
    "GPU3    SYS     SYS     NV4      X      1,3,5,7,9,11    1\n" + LEGEND
)


def test_gpu_links_reads_only_gpu_to_gpu_cells():
    assert gpu_links(NVSWITCH) == ["NV18"] * 6
    assert sorted(set(gpu_links(PCIE))) == ["NODE", "SYS"]


def test_all_nvlink_is_nvlink():
    assert detect_topology(NVSWITCH)[0] == "nvlink"


def test_pcie_only_is_pcie_even_though_the_legend_says_nv():
    topology, note = detect_topology(PCIE)
    assert topology == "pcie"
    assert "no NV# link" in note


def test_partly_nvlink_is_validated_as_pcie():
    topology, note = detect_topology(PAIRS)
    assert topology == "pcie"
    assert "only some GPU pairs" in note


def test_no_nvidia_smi_is_any():
    assert detect_topology(None)[0] == "any"


NO_GPU = {"torch_version": "2.13.0+cpu", "cuda_available": False, "device_count": 0}
EIGHT_GPUS = {"torch_version": "2.9.1+cu129", "cuda_available": True, "device_count": 8}


def test_cpu_plan_defaults_to_gloo_two_ranks():
    node = plan("auto", "auto", None, "auto", "py", NO_GPU)
    assert (node.device, node.backend, node.world_size, node.topology) == ("cpu", "gloo", 2, "any")
    assert (node.python, node.torch_version) == ("py", "2.13.0+cpu")
    assert plan("cpu", "gloo", 3, "pcie", "py", NO_GPU).topology_note == "declared with --topology"


def test_gpu_plan_defaults_to_nccl_on_every_gpu():
    node = plan("auto", "auto", None, "pcie", "py", EIGHT_GPUS)
    assert (node.device, node.backend, node.world_size) == ("cuda", "nccl", 8)
    assert plan("cuda", "gloo", 2, "pcie", "py", EIGHT_GPUS).backend == "gloo"


@pytest.mark.parametrize(
    ("args", "info", "message"),
    [
        (("cpu", "nccl", 2, "auto"), NO_GPU, "--backend nccl needs --device cuda"),
        (("cpu", "auto", 1, "auto"), NO_GPU, "at least 2 ranks"),
        (("cuda", "auto", 2, "auto"), NO_GPU, r"PyTorch 2.13.0\+cpu \(py\) sees no CUDA GPU"),
        (("cuda", "auto", 9, "pcie"), EIGHT_GPUS, "more than the 8 GPUs PyTorch sees"),
    ],
)
def test_impossible_plans_say_what_to_change(args, info, message):
    with pytest.raises(MachineError, match=message):
        plan(*args, "py", info)


def test_probe_reads_torch_from_the_chosen_interpreter():
    assert default_python() == sys.executable  # the venv has torch
    info = probe_torch(sys.executable)
    assert info["torch_version"].startswith("2.13.0")
    assert info["device_count"] == 0 and info["cuda_available"] is False


def test_probe_of_an_interpreter_without_torch_says_so(tmp_path):
    fake = tmp_path / "python-without-torch"
    fake.write_text(
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    with pytest.raises(MachineError, match=r"cannot import torch.*No module named 'torch'"):
        probe_torch(str(fake))
    with pytest.raises(MachineError, match="could not run it"):
        probe_torch(str(tmp_path / "absent"))
