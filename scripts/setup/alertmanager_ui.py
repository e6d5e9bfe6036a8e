"""Write Alertmanager's web UI out of the vfsgen file its Debian source package carries.

Debian's `prometheus-alertmanager` binary serves its UI from /usr/share/prometheus/alertmanager/ui/
(`--web.ui-path`) and ships that directory empty: the Elm compiler is not in Debian. The same
source package builds `golang-github-prometheus-alertmanager-dev`, whose
asset/assets_vfsdata.go is upstream's generated file holding the built UI (index.html,
script.js, favicon.ico, lib/) as gzip'd Go byte-string literals, the very files upstream's
binary embeds. scripts/setup/ansible.sh takes them from the -dev package of the installed
binary's source version and puts them where the binary looks.

    python3 alertmanager_ui.py assets_vfsdata.go OUTDIR
"""

from __future__ import annotations

import ast
import gzip
import re
import sys
from pathlib import Path

# vfsgen names its types vfsgen<U+06F0>...: one file entry is
# "/static/<path>": &vfsgen<U+06F0>CompressedFileInfo{ ... } (or FileInfo, stored uncompressed).
_VFSGEN = "vfsgen\N{EXTENDED ARABIC-INDIC DIGIT ZERO}"
_ENTRY = re.compile(
    r'"/static/(?P<path>[^"]+)": &' + _VFSGEN
    + r"(?P<kind>CompressedFileInfo|FileInfo)\{(?P<body>.*?)\n\t\t\},",
    re.S,
)  # fmt: skip
_CONTENT = re.compile(
    r'(?:compressedContent|content):\s*\[\]byte\((?P<lit>"(?:[^"\\]|\\.)*")\)', re.S
)
_SIZE = re.compile(r"uncompressedSize:\s*(\d+)")
# What the UI cannot run without (index.html loads script.js, which renders everything).
REQUIRED = ("index.html", "script.js", "favicon.ico")


def extract(source: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for entry in _ENTRY.finditer(source):
        content = _CONTENT.search(entry["body"])
        if content is None:
            raise ValueError(f"/static/{entry['path']}: no content literal")
        data: bytes = ast.literal_eval("b" + content["lit"])
        if entry["kind"] == "CompressedFileInfo":
            data = gzip.decompress(data)
            size = _SIZE.search(entry["body"])
            if size is None or int(size.group(1)) != len(data):
                raise ValueError(f"/static/{entry['path']}: size does not match uncompressedSize")
        path = Path(entry["path"])
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"/static/{entry['path']}: not a relative path")
        files[entry["path"]] = data
    return files


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    files = extract(Path(argv[1]).read_text(encoding="utf-8"))
    missing = [name for name in REQUIRED if name not in files]
    if missing:
        print(f"{argv[1]}: no {', '.join(missing)} under /static: not the Alertmanager UI's "
              "vfsgen file (asset/assets_vfsdata.go)", file=sys.stderr)  # fmt: skip
        return 1
    out = Path(argv[2])
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    print(f"{len(files)} files of the Alertmanager UI in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
