import json

import pytest

from specserve.nccl.presets import (
    REFERENCE,
    PresetError,
    builtin_presets,
    load_presets_json,
    presets_document,
    select_presets,
)
from specserve.profile.nccl import PRESETS, NcclPreset

LL128 = NcclPreset("ll128", "forces LL128", "any", {"NCCL_PROTO": "LL128"})
SIMPLE = NcclPreset("simple", "forces Simple", "any", {"NCCL_PROTO": "Simple"})
NVL = NcclPreset("nvl-only", "", "nvlink", {"NCCL_ALGO": "NVLS"})


def test_builtin_presets_are_the_profile_schema_presets():
    presets = builtin_presets()
    assert list(presets) == list(PRESETS)
    seeds = presets["pcie-8gpu-seeds"]
    assert seeds.env == dict(PRESETS["pcie-8gpu-seeds"].env)
    assert seeds.env["NCCL_PROTO"] == "LL" and seeds.topology == "pcie"
    assert presets[REFERENCE].env == {}


def test_default_selection_on_pcie_runs_reference_first_and_skips_nvlink_presets():
    selection = select_presets(builtin_presets(), None, "pcie")
    names = [p.name for p in selection.run]
    assert names[0] == REFERENCE
    assert "pcie-8gpu-seeds" in names
    assert "nvlink" not in names
    assert [(p.name, why) for p, why in selection.skipped] == [
        (
            "nvlink",
            "meant for nvlink nodes; this node is pcie (name it in --presets to run it)",
        )
    ]
    assert not selection.refused


def test_default_selection_on_nvlink_skips_pcie_presets():
    names = [p.name for p in select_presets(builtin_presets(), None, "nvlink").run]
    assert names == [REFERENCE, "nvlink"]


def test_reference_is_added_when_not_requested_and_not_duplicated():
    pool = {"simple": SIMPLE}
    assert [p.name for p in select_presets(pool, ["simple"], "pcie").run] == [REFERENCE, "simple"]
    assert [p.name for p in select_presets(pool, ["simple", REFERENCE], "pcie").run] == [
        REFERENCE,
        "simple",
    ]


def test_ll128_on_pcie_is_refused_with_the_validators_message():
    selection = select_presets({"ll128": LL128}, ["ll128"], "pcie")
    assert [p.name for p in selection.run] == [REFERENCE]
    [(preset, messages)] = selection.refused
    assert preset.name == "ll128"
    assert any("forces LL128 on a pcie topology" in m for m in messages)
    assert all(m.startswith("error: presets.ll128.NCCL_PROTO") for m in messages)


def test_ll128_on_nvlink_is_accepted():
    selection = select_presets({"ll128": LL128}, ["ll128"], "nvlink")
    assert [p.name for p in selection.run] == [REFERENCE, "ll128"]


def test_force_runs_a_refused_preset_and_records_why():
    selection = select_presets({"ll128": LL128}, ["ll128"], "pcie", force=True)
    assert [p.name for p in selection.run] == [REFERENCE, "ll128"]
    assert not selection.refused
    assert any("forced despite" in n and "LL128" in n for n in selection.notes["ll128"])


def test_explicitly_requested_preset_for_another_topology_carries_a_note():
    selection = select_presets({"nvl-only": NVL}, ["nvl-only"], "nvlink")
    assert "nvl-only" not in selection.notes
    selection = select_presets(builtin_presets(), ["pcie-8gpu-seeds"], "nvlink")
    assert selection.notes["pcie-8gpu-seeds"] == [
        "presets.pcie-8gpu-seeds: meant for pcie nodes, measured on a nvlink node"
    ]


def test_unknown_preset_names_the_available_ones():
    with pytest.raises(PresetError, match=r"unknown preset\(s\) nope; available: default, simple"):
        select_presets({"simple": SIMPLE}, ["nope"], "pcie")


def test_reference_must_be_empty():
    bad = {REFERENCE: NcclPreset(REFERENCE, "", "any", {"NCCL_PROTO": "LL"})}
    with pytest.raises(PresetError, match=r"must set no variables.*NCCL_PROTO"):
        select_presets(bad, None, "pcie")


def test_unknown_topology_is_refused():
    with pytest.raises(PresetError, match="topology 'sxm'"):
        select_presets({}, None, "sxm")


def test_presets_json_round_trips(tmp_path):
    path = tmp_path / "presets.json"
    path.write_text(json.dumps(presets_document(builtin_presets())))
    assert load_presets_json(path) == builtin_presets()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"presets": {}}', "expected"),
        ('{"presets": [{"env": {}}]}', r"presets\[0\]\.name: missing"),
        ('{"presets": [{"name": "a", "env": {"NCCL_BUFFSIZE": 4}}]}', r"\.env: must map"),
        ('{"presets": [{"name": "a", "topology": "sxm"}]}', r"\.topology: 'sxm'"),
        ('{"presets": [{"name": "a"}, {"name": "a"}]}', "defined twice"),
    ],
)
def test_bad_presets_json_names_the_problem(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(PresetError, match=message):
        load_presets_json(path)


def test_missing_presets_json_is_a_clear_error(tmp_path):
    with pytest.raises(PresetError, match="cannot read it"):
        load_presets_json(tmp_path / "absent.json")
