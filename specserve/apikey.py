"""The server's API key on the client side: one reader for every command that calls the server
(`specserve verify`, `specserve bench`), so each takes the key the same ways, strips it the same
way and refuses an empty one with the same words.

The key comes from a file (never an argv word, which `ps` and shell history show), or from an
environment variable; it is never printed (the callers redact with specserve.secrets).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

API_KEY_ENV = "SPECSERVE_API_KEY"
FILE_FLAG = "--api-key-file"
ENV_FLAG = "--api-key-env"


class ApiKeyError(ValueError):
    """The key was asked for where it is not: the message names the flag and what is wrong."""


def read_api_key(file: Path | str | None = None, env: str | None = None) -> str | None:
    """The key from `file` (`-`: standard input), else from the variable `env`, else from
    $SPECSERVE_API_KEY; None when none is given and the default variable is unset or blank.

    A file or variable named explicitly must hold a key: an empty one is an error, as it means
    a mount or a secret that did not arrive, and sending no key would fail later with a 401
    that names neither.
    """
    if file is not None:
        try:
            text = sys.stdin.read() if str(file) == "-" else Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ApiKeyError(f"{FILE_FLAG} {file}: {exc.strerror}") from None
        if not text.strip():
            raise ApiKeyError(f"{FILE_FLAG} {file} is empty")
        return text.strip()
    if env is not None:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ApiKeyError(f"{ENV_FLAG} {env}: the variable is unset or empty")
        return value
    return os.environ.get(API_KEY_ENV, "").strip() or None
