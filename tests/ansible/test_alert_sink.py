"""The demo's alert sink (ansible/roles/monitoring/files/alert_sink.py) and the Alertmanager UI
extraction (scripts/setup/alertmanager_ui.py), in process, on loopback.

test_monitoring_ui.py delivers a real alert through Prometheus and Alertmanager to the sink in
its container; here its edges: what a line holds, and the requests it refuses.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sink = _load("alert_sink", ROOT / "ansible/roles/monitoring/files/alert_sink.py")
ui = _load("alertmanager_ui", ROOT / "scripts/setup/alertmanager_ui.py")

# What Alertmanager 0.25 posts (webhook payload version 4), trimmed to the fields the sink reads.
NOTIFICATION = {
    "version": "4",
    "receiver": "specserve-critical",
    "status": "firing",
    "groupKey": '{}/{service="specserve",severity="critical"}:{alertname="SpecServeNoDecodeLines"}',
    "alerts": [
        {
            "status": "firing",
            "labels": {
                "alertname": "SpecServeNoDecodeLines",
                "severity": "critical",
                "service": "specserve",
                "instance": "127.0.0.1:9433",
            },
            "annotations": {"summary": "No decode line read while SGLang reports running requests"},
        }
    ],
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = sink.ThreadingHTTPServer(("127.0.0.1", 0), sink.Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_notification_is_one_json_line_on_stdout(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _ = _post(
        url + "/critical",
        json.dumps(NOTIFICATION).encode(),
        {"Content-Type": "application/json", "Authorization": "Bearer s3cret-value"},
    )
    assert status == 200
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["path"] == "/critical"
    assert line["receiver"] == "specserve-critical"
    assert line["status"] == "firing"
    assert line["alerts"] == [
        "firing SpecServeNoDecodeLines severity=critical instance=127.0.0.1:9433: "
        "No decode line read while SGLang reports running requests"
    ]
    assert line["notification"] == NOTIFICATION
    # That a credential came is logged; the credential never is.
    assert line["authorization_header"] is True
    assert "s3cret-value" not in lines[0]
    datetime.fromisoformat(line["received_at"])


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        (b"{not json", 400, "not JSON"),
        (b"[1, 2]", 400, "a JSON object is expected"),
        (b"\xff\xfe", 400, "not JSON"),
    ],
)
def test_what_is_not_a_notification_is_refused_and_not_logged(
    url: str, capsys: pytest.CaptureFixture[str], body: bytes, status: int, says: str
) -> None:
    got, text = _post(url + "/warning", body)
    assert (got, says in text) == (status, True), text
    assert capsys.readouterr().out == ""


def test_a_body_over_the_limit_is_refused_unread(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    request = urllib.request.Request(
        url + "/warning", data=b"{}", method="POST",
        headers={"Content-Length": str(sink.MAX_BODY_BYTES + 1)},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 413
    assert f"the limit is {sink.MAX_BODY_BYTES}" in raised.value.read().decode()
    assert capsys.readouterr().out == ""


def test_health_and_readiness(url: str) -> None:
    for path in ("/-/healthy", "/-/ready"):
        with urllib.request.urlopen(url + path, timeout=10) as response:
            assert response.status == 200
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url + "/", timeout=10)
    assert raised.value.code == 404


def test_summary_of_an_alert_without_annotations() -> None:
    line = json.loads(
        sink.notification_line(
            "/default",
            {
                "status": "resolved",
                "alerts": [{"status": "resolved", "labels": {"alertname": "X"}}],
            },
            datetime(2026, 1, 1, tzinfo=UTC),
            False,
        )
    )
    assert line["alerts"] == ["resolved X"]
    assert line["received_at"] == "2026-01-01T00:00:00+00:00"


# --- the Alertmanager UI out of vfsgen's Go file -----------------------------------------------

V = "vfsgen\N{EXTENDED ARABIC-INDIC DIGIT ZERO}"


def _go_bytes(data: bytes) -> str:
    return '"' + "".join(f"\\x{b:02x}" for b in data) + '"'


def _vfsgen(files: dict[str, bytes], stored: set[str] = frozenset(), size_off: int = 0) -> str:
    """A file laid out as vfsgen writes asset/assets_vfsdata.go."""
    entries = []
    for name, data in files.items():
        if name in stored:
            entries.append(
                f'\t\t"/static/{name}": &{V}FileInfo{{\n\t\t\tname:    "{name}",\n'
                f"\t\t\tcontent: []byte({_go_bytes(data)}),\n\t\t}},"
            )
        else:
            entries.append(
                f'\t\t"/static/{name}": &{V}CompressedFileInfo{{\n\t\t\tname: "{name}",\n'
                f"\t\t\tuncompressedSize: {len(data) + size_off},\n\n"
                f"\t\t\tcompressedContent: []byte({_go_bytes(gzip.compress(data))}),\n\t\t}},"
            )
    return "var Assets = func() http.FileSystem {\n\tfs := " + V + "FS{\n" + "\n".join(entries)


def test_the_ui_files_come_out_byte_for_byte() -> None:
    files = {
        "index.html": b"<html>Alertmanager</html>",
        "script.js": b'var Elm = "\\u00e9";\n' * 50,
        "favicon.ico": bytes(range(256)),
        "lib/font-awesome-4.7.0/fonts/fontawesome-webfont.woff2": b"\x00\x01woff2",
    }
    woff2 = "lib/font-awesome-4.7.0/fonts/fontawesome-webfont.woff2"
    assert ui.extract(_vfsgen(files, stored={woff2})) == files


def test_a_size_mismatch_or_a_path_out_of_the_tree_is_refused() -> None:
    with pytest.raises(ValueError, match="size does not match"):
        ui.extract(_vfsgen({"script.js": b"x" * 10}, size_off=1))
    with pytest.raises(ValueError, match="not a relative path"):
        ui.extract(_vfsgen({"../escape.js": b"x"}))


def test_a_file_without_the_ui_fails_naming_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "assets_vfsdata.go"
    source.write_text(_vfsgen({"index.html": b"<html></html>"}), encoding="utf-8")
    assert ui.main(["alertmanager_ui.py", str(source), str(tmp_path / "out")]) == 1
    assert "no script.js, favicon.ico under /static" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
