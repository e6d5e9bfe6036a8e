"""values.yaml's `# --` comments are the values schema's descriptions (one home for a value's
meaning): a description changed in the schema changes the comment; a comment with no
description to come from is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specserve.docblocks import BlockError
from specserve.generate.values_comments import comments, describe

CHART = Path(__file__).resolve().parents[2] / "charts" / "specserve"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = (CHART / "values.yaml").read_text()


def test_the_shipped_comments_are_the_schemas_descriptions() -> None:
    assert comments(VALUES, SCHEMA) == VALUES
    # Through a $ref with a use site's own words: the three images say which image they are.
    assert "SGLang image" in (describe(SCHEMA, ("image", "repository")) or "")
    assert "exporter image" in (describe(SCHEMA, ("exporterImage", "repository")) or "")


def test_a_changed_description_changes_the_comment_and_nothing_else() -> None:
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["replicaCount"]["description"] = (
        "How many servers. " + "A long sentence that wraps at the width. " * 4)
    out = comments(VALUES, schema)
    block = out.split("\nreplicaCount:")[0].rsplit("\n\n", 1)[1]
    assert block.startswith("# -- How many servers. A long sentence")
    assert all(len(line) <= 100 for line in block.splitlines())
    assert all(line.startswith("# ") for line in block.splitlines())
    # Only comments moved: the values are the same document.
    assert yaml.safe_load(out) == yaml.safe_load(VALUES)
    assert "Server pods. Each one is a whole SGLang" in VALUES
    assert "Server pods. Each one is a whole SGLang" not in out  # the old words are gone


def test_a_comment_without_a_description_is_refused_naming_the_value() -> None:
    schema = json.loads(json.dumps(SCHEMA))
    del schema["properties"]["replicaCount"]["description"]
    with pytest.raises(BlockError, match=r"above replicaCount has no description in .*schema"):
        comments(VALUES, schema)
