"""The docs' reference tables follow their sources: change a source once, regenerate, and the
table changes with it. (That the committed tables equal what their sources give today is the one
drift test, tests/test_generated.py.)"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from specserve import docblocks
from specserve.generate.command import registry, run, stale
from specserve.monitoring import rules
from specserve_exporter import names
from tests import generated_tree

REPO = Path(__file__).resolve().parents[2]


def _produce(path: str, root: Path = REPO) -> str:
    return registry(root)[path]()


def test_a_new_metric_and_a_changed_help_text_change_the_metrics_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _produce("docs/metrics.md")
    added = names.Metric("specserve_probe_widgets", names.MetricType.COUNTER, (names.SOURCE,),
                         "Widgets probed.")  # fmt: skip
    helped = dataclasses.replace(names.SOURCE_UP, help="Changed help text.")
    monkeypatch.setattr(names, "ALL", (*names.ALL[:-3], helped, *names.ALL[-2:], added))
    after = _produce("docs/metrics.md")
    sources = "`source` = file, docker, kubernetes, stdin"
    assert f"| `specserve_probe_widgets_total` | counter | {sources} | Widgets probed. |" in after
    assert f"| `specserve_source_up` | gauge | {sources} | Changed help text. |" in after
    # Only the table moved: the prose around it is the file's own.
    assert after.split("<!-- BEGIN GENERATED metrics")[0] == before.split(
        "<!-- BEGIN GENERATED metrics")[0]
    assert after.split("<!-- END GENERATED metrics -->")[1] == before.split(
        "<!-- END GENERATED metrics -->")[1]
    assert "docs/metrics.md" in stale(REPO)


def test_a_changed_alert_changes_the_alerts_table(monkeypatch: pytest.MonkeyPatch) -> None:
    first = rules.ALERTS[0]
    threshold = dataclasses.replace(first.thresholds[0], default=0.5)
    changed = dataclasses.replace(first, meaning="A changed meaning.", for_="42m",
                                  compare_to=threshold)  # fmt: skip
    monkeypatch.setattr(rules, "ALERTS", (changed, *rules.ALERTS[1:]))
    after = _produce("docs/alerts.md")
    assert f"| `{first.name}` | {first.severity} | {first.window} | 42m | A changed meaning. | " \
        f"`{threshold.name}` (0.5): " in after  # fmt: skip


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the generators read and write, for edits of file sources."""
    return generated_tree.copy(tmp_path)


def test_a_lost_table_marker_is_a_one_line_error(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tree / "docs" / "metrics.md"
    doc.write_text(doc.read_text().replace("<!-- END GENERATED metrics -->\n", ""))
    assert run(tree, check=True) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "docs/metrics.md lost its '<!-- BEGIN GENERATED metrics'" in err


def test_a_hand_edit_inside_a_table_is_stale_and_regenerated(tree: Path) -> None:
    doc = tree / "docs" / "alerts.md"
    doc.write_text(doc.read_text().replace("| critical |", "| page |", 1))
    assert "docs/alerts.md" in stale(tree)
    assert run(tree, check=False) == 0
    assert doc.read_text() == (REPO / "docs" / "alerts.md").read_text()


def test_cells_escape_pipes_and_join_lines() -> None:
    assert docblocks.table(("a", "b"), [("x | y", "one\n  two")]) == (
        "| a | b |\n| --- | --- |\n| x \\| y | one two |\n"
    )
    assert docblocks.code("`[[x]]`") == "`` `[[x]]` ``"


def test_an_argument_spec_change_changes_the_ansible_tables(tree: Path) -> None:
    specs = tree / "ansible" / "roles" / "weights" / "meta" / "argument_specs.yml"
    specs.write_text(specs.read_text().replace(
        "default: /var/log/specserve\n", "default: /srv/weights-logs\n"))  # fmt: skip
    role = tree / "ansible" / "roles" / "probe" / "meta"
    role.mkdir(parents=True)
    (role / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    short_description: A probe role\n    options:\n"
        "      probe_depth:\n        type: int\n        default: 3\n"
        "        description: How deep | it probes.\n"
    )
    assert "docs/ansible.md" in stale(tree)
    assert run(tree, check=False) == 0
    doc = (tree / "docs" / "ansible.md").read_text()
    assert "| `weights_log_dir` | `/srv/weights-logs` |" in doc
    assert "#### `probe`\n\nA probe role.\n\n| variable | default | meaning |" in doc
    assert "| `probe_depth` | `3` | How deep \\| it probes. |" in doc


def test_a_schema_description_and_a_values_default_change_the_chart_values_table(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema_path = tree / "charts" / "specserve" / "values.schema.json"
    schema = json.loads(schema_path.read_text())
    schema["properties"]["replicaCount"]["description"] = "Changed | description."
    schema_path.write_text(json.dumps(schema, indent=2) + "\n")
    values = tree / "charts" / "specserve" / "values.yaml"
    values.write_text(values.read_text().replace("\nreplicaCount: 1\n", "\nreplicaCount: 3\n"))
    assert "charts/specserve/README.md" in stale(tree)
    assert run(tree, check=False) == 0
    readme = (tree / "charts" / "specserve" / "README.md").read_text()
    assert "| `replicaCount` | `3` | Changed \\| description. |" in readme
    # A value without a description has no documentation: generation names it.
    del schema["properties"]["image"]["properties"]["digest"]
    schema_path.write_text(json.dumps(schema, indent=2) + "\n")
    assert run(tree, check=True) == 2
    assert "image.digest has no description" in capsys.readouterr().err


def test_a_changed_pin_changes_the_versions_table_and_the_install_line(tree: Path) -> None:
    versions = tree / "versions.yaml"
    text = versions.read_text()
    versions.write_text(text.replace("tag: v3.5.0", "tag: v3.9.9").replace(
        "ansible_core: 2.19.14", "ansible_core: 2.99.1"))  # fmt: skip
    assert "docs/ansible.md" in stale(tree)
    assert run(tree, check=False) == 0
    doc = (tree / "docs" / "ansible.md").read_text()
    assert "| `upstream_images.prometheus` | `prom/prometheus:v3.9.9` |" in doc
    assert "| `ansible.ansible_core` | `2.99.1` |" in doc
    assert ".venv/bin/pip install ansible-core==2.99.1 ansible==" in doc
