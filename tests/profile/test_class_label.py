"""server.request_class_label: the names `check` refuses (Prometheus would reject them, or SGLang
already sets them on its tokenizer metrics), what it renders, and the warning without metrics.
That SGLang parses and resolves the rendered flags: tests/contract/test_class_label.py."""

from __future__ import annotations

import pytest
from helpers import FIXTURES, check_json, kimi_doc, write_doc

from specserve.profile.classlabel import (
    ALLOWED_LABELS_FLAG,
    CLASS_LABEL_HEADER,
    HEADER_FLAG,
    RULES_CLASS_LABEL,
    TAKEN_LABELS,
    label_name_problem,
)
from specserve.profile.loader import load_profile
from specserve.profile.render import render_argv
from specserve.upstream import VERIFIED_VERSIONS


def _check(tmp_path, label, **server):
    doc = kimi_doc()
    doc["server"].update(request_class_label=label, **server)
    return check_json(write_doc(tmp_path, doc), "--weights-root", str(FIXTURES),
                      "--configs-only", "--no-baseline-check")


@pytest.mark.parametrize("label", ["1class", "workload-class", "class.name", "wörk", ""])
def test_a_name_prometheus_rejects_is_refused_by_the_schema(tmp_path, label):
    code, report = _check(tmp_path, label)
    assert code != 0 and not report["ok"]
    assert any(e["field"] == "server.request_class_label" for e in report["errors"]), report


@pytest.mark.parametrize("label", ["__class", "model_name", "le", "is_streaming", "instance"])
def test_a_reserved_or_taken_name_is_refused_by_check(tmp_path, label):
    code, report = _check(tmp_path, label)
    assert code == 1
    [error] = [e for e in report["errors"] if e["field"] == "server.request_class_label"]
    assert repr(label) in error["problem"] and "workload_class" in error["fix"]


def test_every_taken_name_is_a_valid_name_refused_for_being_taken() -> None:
    for name in TAKEN_LABELS:
        problem = label_name_problem(name)
        assert problem is not None and "already set" in problem
    assert label_name_problem("workload_class") is None


def test_another_name_than_the_rules_read_warns(tmp_path):
    code, report = _check(tmp_path, "tenant_class")
    assert code == 0 and report["errors"] == []
    [warning] = [w for w in report["warnings"] if w["field"] == "server.request_class_label"]
    assert RULES_CLASS_LABEL in warning["problem"] and "tenant_class" in warning["problem"]


def test_a_good_name_passes_and_warns_only_without_metrics(tmp_path):
    code, report = _check(tmp_path, "workload_class")
    assert code == 0 and report["errors"] == []
    assert not [w for w in report["warnings"] if w["field"] == "server.request_class_label"]
    code, report = _check(tmp_path, "workload_class", enable_metrics=False)
    assert code == 0
    [warning] = [w for w in report["warnings"] if w["field"] == "server.request_class_label"]
    assert "enable_metrics" in warning["problem"]


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_label_renders_both_flags_and_unset_renders_neither(tmp_path, version):
    doc = kimi_doc()
    doc["server"]["request_class_label"] = "workload_class"
    argv = render_argv(load_profile(write_doc(tmp_path, doc)), sglang_version=version)
    at = argv.index(ALLOWED_LABELS_FLAG)
    assert argv[at:at + 4] == [ALLOWED_LABELS_FLAG, "workload_class", HEADER_FLAG,
                               CLASS_LABEL_HEADER]
    bare = render_argv(load_profile(write_doc(tmp_path, kimi_doc(), "bare.yaml")),
                       sglang_version=version)
    assert ALLOWED_LABELS_FLAG not in bare and HEADER_FLAG not in bare


def test_extra_args_may_not_set_the_flags_the_field_owns(tmp_path):
    doc = kimi_doc()
    doc["server"]["extra_args"] = [ALLOWED_LABELS_FLAG, "team"]
    code, report = check_json(write_doc(tmp_path, doc), "--weights-root", str(FIXTURES),
                              "--configs-only", "--no-baseline-check")
    assert code == 1
    assert any("server.request_class_label" in e["problem"] + e["fix"] for e in report["errors"])
