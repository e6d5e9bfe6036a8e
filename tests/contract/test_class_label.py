"""The request-class label (server.request_class_label) is SGLang's custom labels, in every
verified version: the rendered flags parse and resolve to the label and header SGLang reads, the
validation both SGLang and the stand-in apply is the same, and the stand-in keeps from a
request's header exactly what SGLang's own extract_custom_labels keeps.

SGLang's side of the header: OpenAIServingBase.extract_custom_labels, its statements taken from
the installed serving_base.py (the module imports the whole server) and run with the real orjson
and a get_observability() answering the case's header flag, as test_request_spec_details.py runs
the tokenizer manager's formula.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest
import yaml

from specserve.profile.classlabel import (
    ALLOWED_LABELS_FLAG,
    CLASS_LABEL_HEADER,
    HEADER_FLAG,
    header_value,
)
from specserve.standin.api import extract_custom_labels
from specserve.standin.args import ResolutionError
from specserve.standin.args import parse_args as standin_parse_args
from specserve.upstream import VERIFIED_VERSIONS
from tests.contract.rendered_sources import ROOT, _render_document
from tests.contract.sglang_venv import run_python, run_script, run_snippet
from tests.contract.test_resolved_argv import cpu_argv

LABEL = "workload_class"
FIELDS = ["tokenizer_metrics_allowed_custom_labels", "tokenizer_metrics_custom_labels_header"]

RUN_SGLANG = r"""
import ast, json, logging, sys, types
from pathlib import Path
import orjson
import sglang

path = Path(sglang.__file__).parent / "srt" / "entrypoints" / "openai" / "serving_base.py"
tree = ast.parse(path.read_text(encoding="utf-8"))
method = next(n for n in ast.walk(tree)
              if isinstance(n, ast.FunctionDef) and n.name == "extract_custom_labels")
module = ast.Module(body=[method], type_ignores=[])
out = []
for case in json.load(sys.stdin):
    namespace = {
        "orjson": orjson, "json": json, "logger": logging.getLogger("case"),
        "get_observability": lambda: types.SimpleNamespace(
            tokenizer_metrics_custom_labels_header=case["header"]),
    }
    exec(compile(ast.fix_missing_locations(module), str(path), "exec"), namespace)
    # OpenAIServingBase.__init__: the allowed names as a set, None when none is set.
    serving = types.SimpleNamespace(
        allowed_custom_labels=set(case["allowed"]) if case["allowed"] else None)
    headers = {k.lower(): v for k, v in case["headers"].items()}
    request = types.SimpleNamespace(
        headers=types.SimpleNamespace(get=lambda name: headers.get(name.lower())))
    out.append(namespace["extract_custom_labels"](serving, request))
print(json.dumps(out))
"""

# (allowed names, the header flag, the request's headers).
CASES: list[tuple[list[str], str, dict[str, str]]] = [
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: header_value(LABEL, "code")}),
    ([LABEL], CLASS_LABEL_HEADER, {"X-Custom-Labels": '{"workload_class": "chat", "team": "a"}'}),
    ([LABEL, "team"], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: '{"team": "a", "x": "y"}'}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: '{"workload_class": 7}'}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: '{"team": "a"}'}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: '["workload_class", "code"]'}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: '"code"'}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: "workload_class=code"}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: '{"workload_class": NaN}'}),
    ([LABEL], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: ""}),
    ([LABEL], CLASS_LABEL_HEADER, {}),
    ([LABEL], "x-other", {CLASS_LABEL_HEADER: header_value(LABEL, "code")}),
    ([LABEL], "", {CLASS_LABEL_HEADER: header_value(LABEL, "code")}),
    ([], CLASS_LABEL_HEADER, {CLASS_LABEL_HEADER: header_value(LABEL, "code")}),
]


@cache
def sglang_extracts(version: str) -> list[Any]:
    cases = [{"allowed": a, "header": h, "headers": hs} for a, h, hs in CASES]
    return run_snippet(version, RUN_SGLANG, cases)


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_standin_keeps_what_sglangs_extract_custom_labels_keeps(version: str) -> None:
    theirs = sglang_extracts(version)
    for (allowed, header, headers), expected in zip(CASES, theirs, strict=True):
        lowered = {k.lower(): v for k, v in headers.items()}
        ours = extract_custom_labels(
            lambda name, h=lowered: h.get(name.lower()), tuple(allowed), header)
        assert ours == expected, (allowed, header, headers)
    # The cases reach every outcome: kept, filtered, dropped.
    assert {"workload_class": "code"} in theirs and None in theirs and {} in theirs


def _label_argv(version: str, label: str | None = LABEL) -> list[str]:
    doc = yaml.safe_load((ROOT / "profiles" / "standin-cpu.yaml").read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    doc.setdefault("server", {})["request_class_label"] = label
    return _render_document(doc, version, "class-label.yaml")


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_the_rendered_label_resolves_to_what_sglang_reads(version: str) -> None:
    argv = _label_argv(version)
    assert argv[argv.index(ALLOWED_LABELS_FLAG) + 1] == LABEL
    assert argv[argv.index(HEADER_FLAG) + 1] == CLASS_LABEL_HEADER
    bare = _label_argv(version, None)
    assert ALLOWED_LABELS_FLAG not in bare and HEADER_FLAG not in bare
    # The argvs start with the launch command: resolution takes the flags after `serve`.
    flags = [cpu_argv(a[a.index("--model-path"):]) for a in (argv, bare)]
    labelled, plain = run_script(
        version, "resolve_argv.py", {"argvs": flags, "fields": FIELDS})
    assert labelled["ok"], labelled
    assert labelled["resolved"] == {
        "tokenizer_metrics_allowed_custom_labels": [LABEL],
        "tokenizer_metrics_custom_labels_header": CLASS_LABEL_HEADER,
    }
    # Unset, SGLang reads no header: the default header alone allows no label.
    assert plain["ok"] and plain["resolved"]["tokenizer_metrics_allowed_custom_labels"] is None
    ours = standin_parse_args(flags[0], version)
    assert (ours.custom_labels, ours.custom_labels_header) == ((LABEL,), CLASS_LABEL_HEADER)


# SGLang validates the header at launch (Engine: server_args.check_server_args(), after
# resolution), not in resolve_once.
LAUNCH_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
from parse_argv import prepare
out = []
for argv in json.load(sys.stdin):
    server_args, failure, _ = prepare(argv)
    try:
        server_args.resolve_once()
        server_args.check_server_args()
        out.append(None)
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", VERIFIED_VERSIONS)
def test_an_empty_header_is_refused_by_sglang_and_the_standin_alike(version: str) -> None:
    base = ["--model-path", str(ROOT / "tests/fixtures/models/Llama-3.1-8B-Instruct"),
            "--device", "cpu", ALLOWED_LABELS_FLAG, LABEL]
    empty = [*base, HEADER_FLAG, ""]
    refused, default = run_python(
        version, ["-c", LAUNCH_CHECK, str(ROOT / "scripts" / "sglang")], [empty, base])
    # SGLang's default header satisfies the check; the profile renders it anyway.
    assert default is None and refused is not None
    with pytest.raises(ResolutionError) as ours:
        standin_parse_args(empty, version)
    assert f"ValueError: {ours.value}" == refused
    assert standin_parse_args(base, version).custom_labels_header == CLASS_LABEL_HEADER
