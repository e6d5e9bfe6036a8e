"""NCCL presets and value validation against NCCL's documented values."""

from __future__ import annotations

import pytest

from specserve.profile.issues import Severity
from specserve.profile.nccl import PRESETS, sglang_overwrites, validate_nccl_env


def test_presets_are_valid_for_their_topology():
    assert {"default", "pcie-8gpu-seeds", "nvlink"} <= set(PRESETS)
    for preset in PRESETS.values():
        assert preset.description
        assert validate_nccl_env(preset.env, preset.topology) == []


def test_seeds_preset_is_the_seeds_exact_values():
    assert PRESETS["pcie-8gpu-seeds"].env == {
        "NCCL_PROTO": "LL",
        "NCCL_ALGO": "Ring",
        "NCCL_P2P_LEVEL": "SYS",
        "NCCL_MAX_NCHANNELS": "16",
        "NCCL_BUFFSIZE": "16777216",
        "NCCL_NTHREADS": "512",
    }
    assert PRESETS["pcie-8gpu-seeds"].topology == "pcie"
    assert PRESETS["default"].env == {}


GOOD = [
    ("NCCL_PROTO", "Simple", "pcie"),
    ("NCCL_PROTO", "ll,simple", "pcie"),
    ("NCCL_PROTO", "^LL128", "pcie"),
    ("NCCL_PROTO", "LL128", "nvlink"),
    ("NCCL_PROTO", "allreduce:LL,Simple;allgather:Simple", "pcie"),
    ("NCCL_ALGO", "Tree,Ring", "pcie"),
    ("NCCL_ALGO", "NVLS", "nvlink"),
    ("NCCL_ALGO", "^NVLS", "pcie"),
    ("NCCL_ALGO", "PAT", "any"),
    ("NCCL_P2P_LEVEL", "PHB", "pcie"),
    ("NCCL_NTHREADS", "64", "pcie"),
    ("NCCL_BUFFSIZE", "4194304", "pcie"),
    ("NCCL_MAX_NCHANNELS", "32", "nvlink"),
    ("NCCL_DEBUG", "INFO", "any"),
    ("NCCL_SOCKET_IFNAME", "=eth0", "any"),
]


@pytest.mark.parametrize(("name", "value", "topology"), GOOD)
def test_documented_values_pass(name, value, topology):
    assert validate_nccl_env({name: value}, topology) == []


BAD = [
    ("NCCL_PROTO", "LL128", "pcie", "forces LL128"),
    ("NCCL_PROTO", "LL128", "any", "forces LL128"),
    ("NCCL_PROTO", "Fast", "pcie", "'Fast' is not a value"),
    ("NCCL_ALGO", "NVLSTree", "pcie", "forces NVLSTree"),
    ("NCCL_ALGO", "Butterfly", "nvlink", "'Butterfly' is not a value"),
    ("NCCL_P2P_LEVEL", "NVSWITCH", "pcie", "not a level"),
    ("NCCL_NTHREADS", "1024", "pcie", "not accepted"),
    ("NCCL_NTHREADS", "96", "pcie", "not accepted"),
    ("NCCL_BUFFSIZE", "-1", "pcie", "not a positive integer"),
    ("NCCL_BUFFSIZE", "16M", "pcie", "not a positive integer"),
    ("NCCL_MAX_NCHANNELS", "0", "pcie", "not a positive integer"),
    ("NCCL_P2P_DISABLE", "yes", "pcie", "not 0 or 1"),
    ("SGLANG_FOO", "1", "pcie", "not an NCCL variable"),
]


@pytest.mark.parametrize(("name", "value", "topology", "problem"), BAD)
def test_bad_values_are_errors(name, value, topology, problem):
    issues = validate_nccl_env({name: value}, topology, field_prefix="nccl.overrides")
    assert [i.severity for i in issues] == [Severity.ERROR]
    assert issues[0].field == f"nccl.overrides.{name}"
    assert problem in issues[0].problem
    assert issues[0].fix


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NCCL_P2P_LEVEL", "3"),
        ("NCCL_BUFFSIZE", "10000000"),
        ("NCCL_PROTOCOL", "LL"),
    ],
)
def test_questionable_values_are_warnings(name, value):
    issues = validate_nccl_env({name: value}, "pcie")
    assert [i.severity for i in issues] == [Severity.WARNING]


@pytest.mark.parametrize(
    ("name", "value", "flags", "warned"),
    [
        ("NCCL_CUMEM_ENABLE", "0", set(), False),  # SGLang keeps a set value without the flag
        ("NCCL_CUMEM_ENABLE", "0", {"--enable-symm-mem"}, True),
        ("NCCL_CUMEM_ENABLE", "1", {"--enable-symm-mem"}, False),  # what SGLang writes anyway
        ("NCCL_NVLS_ENABLE", "0", {"--enable-nccl-nvls"}, True),
        ("NCCL_NVLS_ENABLE", "0", {"--enable-symm-mem"}, True),
        ("NCCL_NVLS_ENABLE", "1", set(), False),
    ],
)
def test_values_sglang_overwrites_are_warnings(name, value, flags, warned):
    issues = validate_nccl_env({name: value}, "nvlink", overwritten=sglang_overwrites(flags))
    assert [i.severity for i in issues] == ([Severity.WARNING] if warned else [])
    if warned:
        assert f"{name}=1 at startup because of" in issues[0].problem


def test_sglang_switches_are_zero_or_one():
    [issue] = validate_nccl_env({"NCCL_CUMEM_ENABLE": "yes"}, "any")
    assert issue.severity is Severity.ERROR and "not 0 or 1" in issue.problem


def test_min_channels_above_max():
    issues = validate_nccl_env({"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "4"}, "pcie")
    assert any("above NCCL_MAX_NCHANNELS" in i.problem for i in issues)
