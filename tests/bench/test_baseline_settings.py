"""`specserve bench baseline-from --profile`: the block records what the baseline was measured
with, and refuses a run whose server reported other settings than that profile."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from specserve.bench.baseline import BaselineError, baseline_block
from specserve.bench.results import write_result
from specserve.cli import main as specserve_main
from specserve.profile.likeness import SETTINGS
from specserve.profile.loader import load_profile
from specserve.profile.schema import profile_schema
from tests.bench.test_units import _result

ROOT = Path(__file__).resolve().parents[2]
KIMI = ROOT / "profiles" / "kimi-k2.5-int4-eagle3-8gpu.yaml"
IMAGE = "specserve/sglang:0.1.0-sglang0.5.21-cu130"


def _baseline_profile(tmp_path: Path, **server: object) -> Path:
    """The Kimi profile as baseline.yml runs it: no drafter, the cap pinned to 48."""
    doc = yaml.safe_load(KIMI.read_text())
    doc["drafter"] = None
    doc["server"].update(server)
    path = tmp_path / "baseline.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_block_records_the_profile_the_server_and_the_image(tmp_path: Path) -> None:
    result = _result("baseline", False, {1: 80.0, 8: 500.0})
    result["server"]["info"].update(tp_size=8, max_running_requests=48)
    profile = load_profile(_baseline_profile(tmp_path))
    block = baseline_block(result, profile=profile, image=IMAGE)
    jsonschema.validate(block, profile_schema()["properties"]["baseline"])
    assert {k: block[k] for k in SETTINGS} == {
        "image": IMAGE,
        "sglang_version": "0.5.21",  # what the server reported in /server_info
        "target": "/models/Kimi-K2.5",
        "tp": 8,
        "dp": 1,
        "ep": 1,
        "max_running_requests": 48,
        "context_length": None,
        "disable_cuda_graph": False,
        "cuda_graph_max_bs": None,
        "nccl_preset": "pcie-8gpu-seeds",
    }
    # Without the profile: the numbers only, as before.
    assert set(baseline_block(result)) == {"gen_throughput_tok_s", "source"}


def test_a_server_that_ran_other_settings_than_the_profile_is_refused(tmp_path: Path) -> None:
    result = _result("baseline", False, {1: 80.0})
    # An uncapped baseline server (the bare profile without the pinned cap) says so itself.
    result["server"]["info"].update(tp_size=8, max_running_requests=None)
    profile = load_profile(_baseline_profile(tmp_path))
    with pytest.raises(BaselineError, match="max_running_requests=None but the profile"):
        baseline_block(result, profile=profile)
    result["server"]["info"].update(tp_size=4, max_running_requests=48)
    with pytest.raises(BaselineError, match="tp_size=4"):
        baseline_block(result, profile=profile)


def test_the_cli_prints_the_recorded_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _result("baseline", False, {1: 80.0})
    result["server"]["info"].update(tp_size=8, max_running_requests=48)
    results = tmp_path / "results.json"
    write_result(result, results)
    profile = _baseline_profile(tmp_path)
    argv = ["bench", "baseline-from", str(results), "--profile", str(profile), "--image", IMAGE,
            "--format", "json"]  # fmt: skip
    assert specserve_main(argv) == 0
    block = json.loads(capsys.readouterr().out)["baseline"]
    assert block["max_running_requests"] == 48 and block["image"] == IMAGE
    assert specserve_main([*argv[:4], str(tmp_path / "missing.yaml")]) == 2
    assert "--profile" in capsys.readouterr().err


def test_baseline_yml_writes_the_recorded_settings_into_the_profile(tmp_path: Path) -> None:
    # The filter baseline.yml writes the block with (specserve_profile_edit): every recorded key
    # lands in the profile, which then validates and compares like for like.
    from specserve.profile.likeness import compare
    from specserve.profile.model import profile_from_document
    from specserve.tune.edit import profile_edit

    result = _result("baseline", False, {1: 80.0})
    result["server"]["info"].update(tp_size=8, max_running_requests=48)
    block = baseline_block(result, profile=load_profile(_baseline_profile(tmp_path)), image=IMAGE)
    text = profile_edit(KIMI.read_text(), baseline={"baseline": block})
    doc = yaml.safe_load(text)
    jsonschema.validate(doc, profile_schema())
    assert {k: doc["baseline"][k] for k in SETTINGS} == {k: block[k] for k in SETTINGS}
    # The profile's comments survive the edit, but the replaced block's own go with its values
    # (the Kimi profile's said the figure records no settings) and the measured one says so.
    assert "# The exporter tails this file" in text
    assert "records none of the" not in text and "fires when speculative throughput" not in text
    assert "# Measured by `specserve bench`" in text
    comparison = compare(profile_from_document(doc), IMAGE, "0.5.21")
    assert comparison.applies and comparison.like_for_like and not comparison.unrecorded
