"""A bytecode cache for modules imported from zip files, loaded into the tests' subprocesses.

Every Ansible task runs its module from a fresh AnsiballZ zip, and Python's zipimport compiles
each module's source from scratch: the ~60 module_utils files of a stat cost 0.2 s of the 0.34 s
a task's module takes (measured here), and the tests run thousands of tasks. A file on disk would
get a .pyc; this gives the zip's sources the same, keyed by their content like PEP 552's
hash-based .pyc files, so the code run is exactly what compiling the same bytes gives.

Test-only: tests/conftest.py puts this directory on PYTHONPATH and names the cache directory in
SPECSERVE_ZIPIMPORT_CACHE; without that variable nothing is patched.
"""

from __future__ import annotations

import os

_CACHE = os.environ.get("SPECSERVE_ZIPIMPORT_CACHE")


def _install(cache: str) -> None:
    import _imp
    import hashlib
    import importlib.util
    import marshal
    import zipimport

    compile_source = zipimport._compile_source  # type: ignore[attr-defined]

    def cached_compile(pathname: str, source: bytes):  # type: ignore[no-untyped-def]
        # The member's path inside its archive: the archive itself is a new temp file per task.
        inner = pathname.rsplit(".zip" + os.sep, 1)[-1]
        key = hashlib.sha256(importlib.util.MAGIC_NUMBER + inner.encode() + b"\0" + source)
        path = os.path.join(cache, key.hexdigest())
        try:
            with open(path, "rb") as cached:
                code = marshal.load(cached)
        except (OSError, EOFError, ValueError, TypeError):
            code = compile_source(pathname, source)
            try:
                os.makedirs(cache, exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "wb") as out:
                    marshal.dump(code, out)
                os.replace(tmp, path)  # whole or absent: parallel tasks race harmlessly
            except OSError:
                pass
            return code
        _imp._fix_co_filename(code, pathname)  # tracebacks name this task's archive
        return code

    zipimport._compile_source = cached_compile  # type: ignore[attr-defined]


if _CACHE:
    _install(_CACHE)
