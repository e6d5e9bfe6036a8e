"""Profile edits (specserve.tune.edit): speculation off or retuned, a new baseline, the user's
comments kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specserve.profile.facts import facts
from specserve.profile.loader import load_profile
from specserve.tune.edit import profile_edit
from specserve.tune.errors import TuneError

from .helpers import STANDIN, save_profile


def test_speculation_off_removes_the_drafter_and_keeps_comments(tmp_path: Path) -> None:
    text = profile_edit(STANDIN.read_text(), "off")
    profile = load_profile(save_profile(tmp_path, text))
    assert profile.speculative is None and facts(profile).draft_tokens is None
    assert "# CPU only" in text and "tests stay on loopback" in text
    assert profile.logging.file == "/var/log/specserve/sglang/sglang.log"


def test_point_and_baseline_edits_load_as_a_valid_profile(tmp_path: Path) -> None:
    text = profile_edit(
        STANDIN.read_text(),
        {"num_steps": 2, "eagle_topk": 4, "num_draft_tokens": 8, "nccl_preset": "default",
         "id": "ignored"},
        baseline={"baseline": {"gen_throughput_tok_s": {"1": 90.04, "8": 533.26},
                               "source": "specserve bench ..."}},
    )
    profile = load_profile(save_profile(tmp_path, text))
    assert profile.drafter is not None
    assert (profile.drafter.num_steps, profile.drafter.eagle_topk,
            profile.drafter.num_draft_tokens) == (2, 4, 8)
    assert profile.baseline == {"1": 90.0, "8": 533.3}
    assert yaml.safe_load(text)["baseline"]["source"] == "specserve bench ..."


def test_a_measured_baseline_drops_the_shipped_blocks_comment(tmp_path: Path) -> None:
    # The shipped stand-in profile says "No recorded settings (a copy, not a measurement)" above
    # its copied figure; once baseline.yml records a measurement, that comment would lie.
    shipped = STANDIN.read_text()
    assert "No recorded settings" in shipped
    measured = {"gen_throughput_tok_s": {"1": 95.04}, "source": "specserve bench run",
                "image": "specserve/standin:0.1.0", "max_running_requests": 48}
    text = profile_edit(shipped, baseline=measured)
    assert "No recorded settings" not in text and "a copy, not a measurement" not in text
    assert text.count("# Measured by `specserve bench` (playbooks/baseline.yml)") == 1
    assert "# CPU only" in text and "tests stay on loopback" in text  # the other comments stay
    again = profile_edit(text, baseline={**measured, "gen_throughput_tok_s": {"1": 96.0}})
    assert again.count("# Measured by") == 1
    profile = load_profile(save_profile(tmp_path, again))
    assert profile.baseline == {"1": 96.0}
    # A block without the settings it was measured with gets no "Measured by" comment.
    bare = profile_edit(shipped, baseline={"gen_throughput_tok_s": {"1": 1.0}, "source": "x"})
    assert "Measured by" not in bare and "No recorded settings" not in bare
    # Dropped with the block (no speculation applied): none of its comments stay behind.
    dropped = profile_edit(text, {"speculative": False}, drop_baseline=True)
    assert "baseline" not in yaml.safe_load(dropped) and "Measured by" not in dropped


def test_tuning_a_profile_without_drafter_is_refused() -> None:
    text = profile_edit(STANDIN.read_text(), "off")
    with pytest.raises(TuneError, match="no drafter to tune"):
        profile_edit(text, {"num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2})
    with pytest.raises(TuneError, match="no drafter to tune"):
        profile_edit(text, {"drafter": {"algorithm": "NGRAM"}})


def test_speculative_must_be_off_or_a_mapping() -> None:
    with pytest.raises(TuneError, match="'off' or a mapping, not 'on'"):
        profile_edit(STANDIN.read_text(), "on")


def test_applying_no_speculation_drops_the_drafter_and_the_baseline(tmp_path: Path) -> None:
    with_baseline = profile_edit(
        STANDIN.read_text(), baseline={"gen_throughput_tok_s": {"1": 90.0}, "source": "bench"})
    point = {"id": "no-spec", "speculative": False, "max_running_requests": 48}
    text = profile_edit(with_baseline, point, drop_baseline=True)
    profile = load_profile(save_profile(tmp_path, text))
    assert profile.speculative is None and profile.baseline == {}
    assert yaml.safe_load(text)["server"]["max_running_requests"] == 48
    assert "# CPU only" in text  # the user's comments survive
    # A sweep point keeps the baseline (drop_baseline is false by default).
    assert "baseline" in yaml.safe_load(profile_edit(with_baseline, point))
