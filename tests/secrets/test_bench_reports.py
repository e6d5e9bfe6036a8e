"""`specserve bench report` on a result written before by-value redaction (the key still inside
`launch_command`, and in a label): results.json, results.md, the plot's titles and legend, and
stdout carry only the marker."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.figure
import matplotlib.text
import pytest

from specserve.cli import main as specserve_main
from specserve.secrets import MARKER
from tests.bench.test_units import _result

KEY = "sk-report-1a2b3c4d5e"


def test_report_redacts_an_old_result_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _result(f"run {KEY}", True, {1: 100.0, 2: 180.0})
    old["server"]["info"].update(launch_command=f"--model-path /m --api-key {KEY}", api_key=MARKER)
    source = tmp_path / "old.json"
    source.write_text(json.dumps(old))
    titles: list[str] = []
    real_savefig = matplotlib.figure.Figure.savefig

    def savefig(fig: matplotlib.figure.Figure, *args: object, **kwargs: object) -> None:
        titles.extend(t.get_text() for t in fig.findobj(matplotlib.text.Text))
        real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    out = tmp_path / "out"
    code = specserve_main(["bench", "report", str(source), "--out-dir", str(out)])
    assert code == 0
    stdout = capsys.readouterr().out
    texts = {
        "results.json": (out / "results.json").read_text(),
        "results.md": (out / "results.md").read_text(),
        "plot texts": "\n".join(titles),
        "stdout": stdout,
    }
    for name, text in texts.items():
        assert text.strip(), name
        assert KEY not in text, name
    assert f"--api-key {MARKER}" in texts["results.json"]
    assert f"run {MARKER}" in texts["results.md"] and f"run {MARKER}" in texts["plot texts"]
