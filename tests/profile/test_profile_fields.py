"""The field table (specserve/profile/fields.py) and what is derived from it: schema.json and the
docs table (committed, generated), the model's defaults, the renderer and the owned flags.

Adding an SGLang flag is one row in the table; `test_a_row_with_a_flag_renders_is_owned_in_the_
schema_and_documented` then proves it end to end for that row. A row other code reads by name
gets a typed model attribute (with the table's default, checked here); a row only render reads
needs none (`Profile.document_value`), as `server.kv_cache_dtype` shows.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from helpers import kimi_doc

from specserve.profile import model
from specserve.profile.fields import (
    BY_PATH,
    DOCS_PATH,
    FIELDS,
    LAYOUT,
    OPTIONAL,
    SCHEMA_PATH,
    SECTIONS,
    Emit,
    Field,
    default_of,
    docs_table,
)
from specserve.profile.flags import OWNED_DESTS, OWNED_FLAGS
from specserve.profile.likeness import SETTINGS as BASELINE_SETTINGS
from specserve.profile.model import profile_from_document
from specserve.profile.render import API_KEY_PLACEHOLDER, EMITTERS, render_argv
from specserve.profile.schema import profile_schema
from specserve.upstream import VERIFIED_VERSIONS

WITH_FLAGS = [f for f in FIELDS if f.owns]
# Where the model keeps a field under another name, or not at all (read by the checks only).
MODEL_NAME = {"baseline.gen_throughput_tok_s": (model.Profile, "baseline_gen_throughput")}
NOT_IN_MODEL = {"version", "baseline.source"}
# What a baseline was measured with: read from the document by specserve/profile/likeness.py.
NOT_IN_MODEL |= {f"baseline.{key}" for key in BASELINE_SETTINGS}
# Read by playbooks/tune.yml from the document (specserve/tune/plan.py).
NOT_IN_MODEL |= {"tuning.methods"}
SECTION_CLASSES: dict[str, type] = {
    "target": model.Target,
    "drafter": model.Drafter,
    "parallelism": model.Parallelism,
    "nodes": model.Nodes,
    "gpu": model.Gpu,
    "server": model.Server,
    "nccl": model.Nccl,
    "logging": model.Logging,
}
# What the special emitters need besides the row's own value to render at all.
SPECIAL_SETUP: dict[str, dict[str, Any]] = {
    "server.disable_cuda_graph": {"server.allow_disable_cuda_graph": True},
    # Over several nodes every rank needs rank 0's address (the deploy's, or the profile's).
    "nodes.count": {"nodes.rendezvous_host": "rank0.example"},
}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _available(since: str | None, version: str) -> bool:
    return since is None or _version_key(version) >= _version_key(since)


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *sections, name = path.split(".")
    for section in sections:
        if doc.get(section) is None:
            doc[section] = {}
        doc = doc[section]
    doc[name] = value


def _sample(row: Field) -> Any:
    """A valid value for `row` that renders (not its default, where that renders nothing)."""
    schema = row.type
    if "enum" in schema:
        return next(v for v in schema["enum"] if v not in (row.default, "EAGLE3", "none"))
    if "oneOf" in schema:
        return {"env": "SAMPLE_KEY"}
    kind = schema["type"][0] if isinstance(schema["type"], list) else schema["type"]
    if kind == "boolean":
        return True
    if kind == "integer":
        return max(schema.get("minimum", 1), 1) + 1
    if kind == "number":
        return 0.5
    return "sample"


def _model_attribute(row: Field) -> dataclasses.Field[Any] | None:
    cls, name = MODEL_NAME.get(row.path) or (
        (SECTION_CLASSES[row.section], row.name) if row.section else (model.Profile, row.name)
    )
    return {f.name: f for f in dataclasses.fields(cls)}.get(name)


# Rows only render reads: no model attribute, their value comes from Profile.document_value.
RENDER_ONLY = [f for f in FIELDS if f.path not in NOT_IN_MODEL and _model_attribute(f) is None]


# --- generated files ----------------------------------------------------------------------------


def test_schema_json_is_the_schema_the_library_validates_with():
    assert json.loads(SCHEMA_PATH.read_text(encoding="utf-8")) == profile_schema()


def test_the_schema_has_every_row_with_its_default_and_nothing_else():
    schema = profile_schema()
    found: set[str] = set()
    for key, sub in schema["properties"].items():
        if key in SECTIONS:
            found |= {f"{key}.{name}" for name in sub["properties"]}
        else:
            found.add(key)
    assert found == set(BY_PATH)
    for row in FIELDS:
        parent = schema["properties"][row.section] if row.section else schema
        leaf = parent["properties"][row.name]
        assert leaf.get("default", OPTIONAL) == (row.default if row.has_default else OPTIONAL)
        assert leaf["description"] == row.doc
        assert (row.name in parent.get("required", [])) == row.required, row.path
    assert list(schema["properties"]) == list(LAYOUT)
    assert {k for k in LAYOUT if k in schema["required"]} == {
        k for k in LAYOUT if (SECTIONS[k].required if k in SECTIONS else BY_PATH[k].required)
    }


def test_the_docs_table_is_between_its_markers_once():
    text = DOCS_PATH.read_text(encoding="utf-8")
    assert text.count(docs_table()) == 1
    assert text.count("| field |") == 1  # the hand-written table is gone


# --- the model ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "row", [f for f in FIELDS if f.path not in NOT_IN_MODEL], ids=lambda r: r.path
)
def test_every_field_is_a_model_attribute_with_the_tables_default_or_render_only(row):
    attribute = _model_attribute(row)
    if attribute is None:  # render-only: it must render, and nothing may need it typed
        assert row.emit in (Emit.VALUE, Emit.SWITCH, Emit.UNLESS_DEFAULT), row.path
        assert not row.required, f"{row.path}: a required field needs a model attribute"
        return
    if row.required:
        assert attribute.default is dataclasses.MISSING
        assert attribute.default_factory is dataclasses.MISSING
    elif row.has_default:
        if attribute.default_factory is not dataclasses.MISSING:
            assert attribute.default_factory() == default_of(row.path)
            # A fresh copy each time: one profile's dict is not another's.
            assert attribute.default_factory() is not attribute.default_factory()
        else:
            assert attribute.default == default_of(row.path)


@pytest.mark.parametrize("section", SECTION_CLASSES)
def test_every_model_attribute_of_a_section_is_a_row(section):
    names = {f.name for f in dataclasses.fields(SECTION_CLASSES[section])}
    rows = {f.name for f in FIELDS if f.section == section and f not in RENDER_ONLY}
    assert names == rows


def test_a_render_only_row_needs_no_attribute_and_reads_the_document():
    # The one-edit path: server.kv_cache_dtype is a row and nothing else (no model attribute).
    assert [f.path for f in RENDER_ONLY] == ["server.kv_cache_dtype"]
    doc = kimi_doc()
    assert render_argv(profile_from_document(doc)).count("--kv-cache-dtype") == 0
    doc["server"]["kv_cache_dtype"] = "fp8_e5m2"
    profile = profile_from_document(doc)
    assert not hasattr(profile.server, "kv_cache_dtype")
    assert profile.document_value("server.kv_cache_dtype") == "fp8_e5m2"
    argv = render_argv(profile)
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8_e5m2"
    assert profile_from_document(kimi_doc()).document_value("server.kv_cache_dtype") is None


def test_a_minimal_profile_gets_every_default_of_the_table():
    doc = {"version": 1, "name": "m", "target": {"path": "/m"}, "parallelism": {"tp": 1}}
    doc["gpu"] = {"count": 1}
    profile = profile_from_document(doc)
    for row in FIELDS:
        if row in RENDER_ONLY:
            assert profile.document_value(row.path) == default_of(row.path), row.path
        elif row.has_default and row.path not in NOT_IN_MODEL and row.section != "drafter":
            holder = getattr(profile, row.section) if row.section else profile
            name = row.name
            if row.path in MODEL_NAME:
                holder, name = profile, MODEL_NAME[row.path][1]
            assert getattr(holder, name) == default_of(row.path), row.path


# --- rendering and owned flags ------------------------------------------------------------------


def test_every_emit_has_its_emitter_and_every_rendering_row_owns_a_flag():
    assert set(EMITTERS) == set(Emit)
    for row in FIELDS:
        if row.emit not in (None, Emit.WORDS):
            assert row.owns, row.path
        if row.owns:
            assert row.emit is not None, f"{row.path} owns flags but never renders them"


@pytest.mark.parametrize("row", WITH_FLAGS, ids=lambda r: r.path)
def test_a_row_with_a_flag_renders_is_owned_in_the_schema_and_documented(row):
    value = _sample(row)
    for version in VERIFIED_VERSIONS:
        doc = kimi_doc()
        _set(doc, row.path, value)
        for path, extra in SPECIAL_SETUP.get(row.path, {}).items():
            _set(doc, path, extra)
        argv = render_argv(profile_from_document(doc), version)
        flags = [o.flag for o in row.owns if _available(o.since, version)]
        rendered = [f for f in [*flags, *row.renders_unowned] if f in argv]
        assert rendered, (version, row.path, argv)
        if row.emit in (Emit.VALUE, Emit.UNLESS_DEFAULT, Emit.DP_SIZE):
            expected = value.upper() if row.path == "drafter.algorithm" else str(value)
            assert argv[argv.index(row.flag) + 1] == expected, (version, row.path)
        if row.emit is Emit.SECRET:
            assert argv[argv.index(row.flag) + 1] == API_KEY_PLACEHOLDER
    for option in row.owns:
        assert OWNED_DESTS[option.dest] == row.path
        for spelling in option.spellings:
            assert OWNED_FLAGS[spelling] == row.path
    section = profile_schema()["properties"][row.section]["properties"]
    assert {k: v for k, v in section[row.name].items() if k in row.type} == row.type
    docs_row = next(
        line for line in DOCS_PATH.read_text().splitlines() if line.startswith(f"| `{row.path}` |")
    )
    for option in row.owns:
        assert all(f"`{s}`" in docs_row for s in option.spellings), (row.path, docs_row)


def test_a_row_left_at_its_default_renders_nothing_of_its_own():
    # The kimi profile sets none of these: the renderer must not invent them.
    argv = render_argv(profile_from_document(kimi_doc()))
    for path in ("target.served_model_name", "parallelism.dp", "parallelism.ep"):
        assert BY_PATH[path].flag not in argv, path
    assert "--enable-dp-attention" not in argv and "--attn-dp-size" not in argv


def test_disable_cuda_graph_renders_nothing_without_its_override():
    doc = kimi_doc()
    doc["server"]["disable_cuda_graph"] = True
    argv = render_argv(profile_from_document(doc))
    assert not any("cuda-graph" in a for a in argv), argv
