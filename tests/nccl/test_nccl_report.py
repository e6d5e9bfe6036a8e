import pytest

from specserve.nccl.presets import REFERENCE
from specserve.nccl.report import (
    add_speedups,
    aggregate,
    expected_nccl_env,
    machine_section,
    preset_entry,
    render_markdown,
)
from specserve.nccl.sizes import parse_sizes
from specserve.profile.nccl import NcclPreset

SIZES = parse_sizes("1,16MiB", 7168, "bfloat16")
FAST = NcclPreset("fast", "", "pcie", {"NCCL_PROTO": "LL"})


def rank_report(rank, env, times, correct=True):
    return {
        "rank": rank,
        "nccl_env_seen": env,
        "device_name": "NVIDIA RTX PRO 6000 Blackwell",
        "hostname": "node1",
        "torch_version": "2.9.1",
        "nccl_version": "2.27.3",
        "cuda_version": "12.9",
        "sizes": [
            {"label": s.label, "times_us": list(t), "correct": correct}
            for s, t in zip(SIZES, times, strict=True)
        ],
    }


def measured(preset, small_us, large_us, correct=True):
    entry = preset_entry(preset, "ok")
    reports = [
        rank_report(r, preset.env, [[small_us] * 3, [large_us] * 3], correct) for r in (1, 0)
    ]
    aggregate(entry, reports, SIZES, 2, expected_nccl_env(preset.env, {}))
    return entry


def test_aggregate_fills_latency_and_bandwidth_per_size():
    entry = measured(FAST, 10.0, 4000.0)
    assert entry["status"] == "ok"
    assert entry["env_seen"] == [{"NCCL_PROTO": "LL"}] * 2
    small, large = entry["results"]
    assert (small["label"], small["nbytes"], small["iterations"]) == ("1tok", 14336, 3)
    assert small["latency_us"]["median"] == 10.0
    assert small["busbw_gbps"] == pytest.approx(14336 / 10e-6 / 1e9)
    assert large["algbw_gbps"] == pytest.approx((16 << 20) / 4000e-6 / 1e9)


def test_env_that_did_not_reach_the_workers_fails_the_preset():
    entry = preset_entry(FAST, "ok")
    reports = [
        rank_report(0, {"NCCL_PROTO": "LL"}, [[1.0], [1.0]]),
        rank_report(1, {}, [[1.0], [1.0]]),
    ]
    aggregate(entry, reports, SIZES, 2, {"NCCL_PROTO": "LL"})
    assert entry["status"] == "failed"
    assert "rank 1 saw NCCL variables {}" in entry["error"]
    assert entry["results"] == []


def test_wrong_sums_fail_the_preset_and_keep_the_numbers():
    entry = measured(FAST, 10.0, 4000.0, correct=False)
    assert entry["status"] == "failed"
    assert "wrong sums at 1tok, 16MiB" in entry["error"]
    assert len(entry["results"]) == 2


def test_expected_env_merges_extra_env_and_keeps_only_nccl():
    extra = {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": "1"}
    assert expected_nccl_env({"NCCL_PROTO": "LL"}, extra) == {
        "NCCL_DEBUG": "WARN",
        "NCCL_PROTO": "LL",
    }


def test_speedups_are_relative_to_default_per_size():
    default = measured(NcclPreset(REFERENCE, "", "any", {}), 20.0, 4000.0)
    fast = measured(FAST, 10.0, 8000.0)
    broken = preset_entry(NcclPreset("broken", "", "any", {}), "failed", error="boom")
    add_speedups([default, fast, broken])
    assert [r["speedup_vs_default"] for r in default["results"]] == [1.0, 1.0]
    assert [r["speedup_vs_default"] for r in fast["results"]] == [2.0, 0.5]
    assert broken["results"] == []


def test_no_speedups_when_default_failed():
    default = preset_entry(NcclPreset(REFERENCE, "", "any", {}), "failed", error="x")
    fast = measured(FAST, 10.0, 8000.0)
    add_speedups([default, fast])
    assert [r["speedup_vs_default"] for r in fast["results"]] == [None, None]


def test_markdown_has_summary_detail_and_not_measured_sections():
    default = measured(NcclPreset(REFERENCE, "", "any", {}), 20.0, 4000.0)
    fast = measured(FAST, 10.0, 8000.0)
    refused = preset_entry(NcclPreset("ll128", "", "any", {}), "refused", error="error: LL128")
    add_speedups([default, fast])
    plan_info = {
        "world_size": 2,
        "device": "cuda",
        "backend": "nccl",
        "topology": "pcie",
        "topology_note": "declared",
    }
    document = {
        "machine": machine_section([rank_report(0, {}, [[1.0], [1.0]])], plan_info),
        "config": {
            "dtype": "bfloat16",
            "hidden_size": 7168,
            "iters": 3,
            "warmup": 1,
            "sizes": [s.as_dict() for s in SIZES],
        },
        "presets": [default, fast, refused],
    }
    text = render_markdown(document)
    assert "2 x NVIDIA RTX PRO 6000 Blackwell (nccl, bfloat16, hidden 7168)" in text
    assert "NCCL 2.27.3" in text
    assert "| size | default | fast |" in text
    assert "| 1tok | 20.0 (1.00x) | 10.0 (2.00x) |" in text
    assert "| 16MiB | 16777216 | fast | 8000.0 | 8000.0 | 2.10 | 0.50x |" in text
    assert "- ll128: refused: error: LL128" in text
    assert "ignores NCCL_*" not in text
    document["machine"]["backend"] = "gloo"
    assert "gloo ignores NCCL_* variables" in render_markdown(document)
