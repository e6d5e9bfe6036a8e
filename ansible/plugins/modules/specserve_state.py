"""Ansible module: the node's deploy records, read validated and written crash-safe.

The records in the server's state directory (last-good/spec.json, last-good/verified.json,
deploy-in-progress.json, ...) decide what a re-run trusts and what a rollback restores. A crash
or a full disk during a plain write leaves an empty or half-written file, and a play that then
parses it with `from_json` dies with Ansible's internal error, or worse, after it has stopped
the server. So every record is:

- written atomically: a temporary file in the same directory, fsync, rename over the record,
  fsync of the directory (the rename itself survives a power loss);
- read with its validation: a record that is missing, empty, not JSON, not an object or missing
  the keys its kind needs comes back as `valid: false` with the reason in words, never as an
  exception, so the play names it and treats it as drift (or rolls back another way).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: specserve_state
short_description: Read the server's deploy records validated, or write one atomically
options:
  state:
    description: read (every record in `records`) or written (`path` with `content`)
    type: str
    choices: [read, written]
    default: read
  records:
    description: "read: name -> {path, kind, required}; kind json (an object with the keys in
      `required`) or text"
    type: dict
  path: {description: "written: the record's path", type: path}
  content: {description: "written: its content", type: str}
  mode: {description: "written: its mode", type: str, default: "0600"}
"""

RETURN = r"""
records:
  description: "read: name -> {exists, valid, error, data (json) or text, sha256}"
  type: dict
  returned: state=read
"""


def read_record(path: str, kind: str, required: list[str]) -> dict[str, Any]:
    """One record as the play sees it; `error` says in words why it cannot be trusted."""
    found: dict[str, Any] = {"path": path, "exists": False, "valid": False, "error": "",
                             "data": {}, "text": ""}
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        found["error"] = "missing"
        return found
    except OSError as exc:
        found.update(exists=True, error=f"unreadable ({exc.strerror or exc})")
        return found
    found["exists"] = True
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        found["error"] = "not UTF-8 text"
        return found
    if not text.strip():
        found["error"] = f"empty ({len(raw)} bytes): a write that did not finish"
        return found
    if kind == "text":
        found.update(valid=True, text=text)
        return found
    try:
        data = json.loads(text)
    except ValueError as exc:
        found["error"] = f"not JSON ({exc}): a write that did not finish?"
        return found
    if not isinstance(data, dict):
        found["error"] = f"not a JSON object (a {type(data).__name__})"
        return found
    missing = [key for key in required if key not in data]
    if missing:
        found["error"] = f"missing {', '.join(missing)}"
        found["data"] = data
        return found
    found.update(valid=True, data=data)
    return found


def write_record(path: str, content: str, mode: int) -> bool:
    """Replace `path` with `content` atomically and durably; whether it changed."""
    directory = os.path.dirname(path) or "."
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == content and (os.stat(path).st_mode & 0o7777) == mode:
                return False
    except (OSError, UnicodeDecodeError):
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["read", "written"], "default": "read"},
            "records": {"type": "dict"},
            "path": {"type": "path"},
            "content": {"type": "str", "no_log": False},
            "mode": {"type": "str", "default": "0600"},
        },
        supports_check_mode=True,
    )
    params = module.params
    if params["state"] == "read":
        records = {}
        for name, spec in (params["records"] or {}).items():
            records[name] = read_record(str(spec["path"]), str(spec.get("kind", "json")),
                                        [str(k) for k in spec.get("required", [])])
        module.exit_json(changed=False, records=records)
    if not params["path"] or params["content"] is None:
        module.fail_json(msg="specserve_state state=written needs path and content")
    mode = int(params["mode"], 8)
    if module.check_mode:
        module.exit_json(changed=False)
    try:
        changed = write_record(params["path"], params["content"], mode)
    except OSError as exc:
        module.fail_json(msg=f"could not write {params['path']}: {exc}")
    module.exit_json(changed=changed, path=params["path"])


if __name__ == "__main__":
    main()
