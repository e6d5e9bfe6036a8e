"""A DSpark drafter's config.json against what SGLang's DSpark worker refuses at load.

SGLang's resolution reads the drafter's config (`_handle_dspark` -> `read_draft_checkpoint_config`)
but swallows a parse error with a warning; the worker then calls
`dspark_config.resolve_runtime_config` on the same config and fails after the weights are
loaded. `check` refuses those configs up front (checks/speculative.py `dspark_config_issues`).
The oracle here is SGLang's own `resolve_runtime_config`, run in each verified version's venv on
variants of the DSpark fixture: `check` finds an error exactly where SGLang raises, quoting its
message. The versions differ: 0.5.23 reads the Markov fields nested under `dflash_config`,
0.5.21 does not.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from specserve.profile.checks import CheckOptions, run_checks
from specserve.profile.checks.speculative import dspark_config_issues
from specserve.profile.model import profile_from_document
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import resolve_argvs, run_snippet
from tests.contract.test_block_drafters import _doc as block_doc
from tests.contract.test_block_drafters import gpu_argv

FIXTURE = ROOT / "tests" / "fixtures" / "models" / "llama-3.1-8b-dspark" / "config.json"
TARGET_VOCAB = 128256  # the Llama-3.1-8B-Instruct fixture's


def _variant(change: Any) -> dict[str, Any]:
    config = copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))
    change(config)
    return config


def _nest_markov(config: dict[str, Any]) -> None:
    config["dflash_config"]["markov_rank"] = config.pop("markov_rank")
    config["dflash_config"]["markov_head_type"] = config.pop("markov_head_type")


def _nest_markov_dspark(config: dict[str, Any]) -> None:
    config["dspark_config"] = {
        "markov_rank": config.pop("markov_rank"),
        "markov_head_type": config.pop("markov_head_type"),
    }


VARIANTS: dict[str, dict[str, Any]] = {
    "the fixture": _variant(lambda c: None),
    "no markov_rank": _variant(lambda c: c.pop("markov_rank")),
    "markov_rank 0": _variant(lambda c: c.update(markov_rank=0)),
    "markov_rank -1": _variant(lambda c: c.update(markov_rank=-1)),
    "no markov_head_type": _variant(lambda c: c.pop("markov_head_type")),
    "markov_head_type lstm": _variant(lambda c: c.update(markov_head_type="lstm")),
    "markov_head_type GATED": _variant(lambda c: c.update(markov_head_type="GATED")),
    "markov fields under dflash_config": _variant(_nest_markov),
    "markov fields under dspark_config": _variant(_nest_markov_dspark),
    "no mask_token_id": _variant(lambda c: c["dflash_config"].pop("mask_token_id")),
    "mask_token_id at the top": _variant(
        lambda c: c.update(mask_token_id=c["dflash_config"].pop("mask_token_id"))
    ),
    "mask_token_id outside the vocab": _variant(
        lambda c: c["dflash_config"].update(mask_token_id=TARGET_VOCAB)
    ),
    "prefixed keys, no head type": _variant(
        lambda c: (
            c.update(dspark_markov_rank=c.pop("markov_rank"), dspark_noise_token_id=5)
            or c.pop("markov_head_type")
        )
    ),
}

ORACLE = """
import json, sys
from sglang.srt.speculative.dspark_components.dspark_config import resolve_runtime_config
request = json.load(sys.stdin)
out = {}
for name, config in request["configs"].items():
    try:
        resolve_runtime_config(draft_hf_config=config, speculative_num_draft_tokens=8,
                               target_vocab_size=request["vocab"])
        out[name] = None
    except Exception as exc:
        out[name] = str(exc)
print(json.dumps(out))
"""


@cache
def _sglang(version: str) -> dict[str, str | None]:
    result: dict[str, str | None] = run_snippet(
        version, ORACLE, {"configs": VARIANTS, "vocab": TARGET_VOCAB}
    )
    return result


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_check_refuses_exactly_what_sglangs_dspark_worker_refuses(
    version: str, variant: str
) -> None:
    raised = _sglang(version)[variant]
    issues = dspark_config_issues(VARIANTS[variant], TARGET_VOCAB, version)
    if raised is None:
        assert issues == [], [i.render() for i in issues]
    else:
        assert len(issues) == 1 and issues[0].severity.value == "error", raised
        assert f'"{raised}"' in issues[0].problem, (raised, issues[0].problem)


def test_the_versions_differ_where_the_docstring_says() -> None:
    """The cases above are not all alike: SGLang accepts the fixture and refuses the broken
    ones in both versions, and only 0.5.21 misses the Markov fields under dflash_config."""
    older, newer = _sglang("0.5.21"), _sglang("0.5.23")
    assert older["the fixture"] is None and newer["the fixture"] is None
    assert older["markov fields under dflash_config"] == (
        "DSpark draft requires markov_rank > 0; got markov_rank=0."
    )
    assert newer["markov fields under dflash_config"] is None
    refused = {name for name, said in newer.items() if said is not None}
    assert refused >= {"no markov_rank", "no markov_head_type", "no mask_token_id",
                       "mask_token_id outside the vocab", "markov_head_type lstm"}  # fmt: skip


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_resolution_swallows_what_the_worker_refuses_and_check_refuses_it(
    version: str, tmp_path: Path
) -> None:
    """A drafter SGLang's worker refuses starts resolving: the error is only a log warning, and
    the gamma cross-check goes with it (a count that is not gamma + 1 passes). `check` refuses
    the profile, quoting the worker."""
    drafter = tmp_path / "dspark"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(VARIANTS["no markov_head_type"]))
    doc = block_doc("DSPARK", str(drafter), num_draft_tokens=5)  # the drafter's gamma is 7
    [result] = resolve_argvs(version, [gpu_argv(_render_document(doc, version, "dspark"))])
    assert result["ok"], result
    assert result["resolved"]["speculative_num_draft_tokens"] == 5
    assert any("Failed to read DSpark draft config" in w for w in result["warnings"])
    profile = profile_from_document(doc, ROOT / "profiles" / "dspark.yaml")
    issues = run_checks(profile, CheckOptions(configs_only=True, sglang_version=version))
    # The count is not refused as "not gamma + 1": SGLang never compares it here.
    [err] = [i for i in issues if i.severity.value == "error"]
    assert err.field == "drafter.path", err.render()
    said = _sglang(version)["no markov_head_type"]
    assert err.severity.value == "error" and f'"{said}"' in err.problem
